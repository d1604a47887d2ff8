"""A downstream subscriber of ``ledger.effects``: every business effect that committed.

What it shows: a consumer with a group of its own (a subscriber never joins a group of the
ledger's services), offsets committed by hand only after the records of a batch are processed
(a crash before the commit redelivers them rather than losing them), and deduplication by the
envelope's ``event_id``. Kafka delivers at least once: the relay may publish an outbox row
twice, and a rebalance redelivers what was processed but not yet committed. The ``event_id``
(a UUIDv7 minted once, when the effect was written to the outbox) is the same on every copy,
in the record's ``event_id`` header and in the envelope's field. Each EffectCommitted is
printed as one JSON line; its payload is documented in ``schemas/ledger.effects.schema.json``.

The ids seen are kept in memory here, which is enough for printing. A subscriber that keeps
state writes the ``event_id`` into a table of its own in the transaction of its write (a
primary key on it refuses the second copy), as ``examples/downstream_service.py`` does with
the operation key.

Run it (``INTENTLEDGER_KAFKA_BOOTSTRAP``, else the broker of ``intentledger infra up``)::

    python examples/effects_subscriber.py --group billing-audit --max-messages 100 --timeout 30

It stops after ``--max-messages`` records (redelivered copies count) or ``--timeout`` seconds.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time

from aiokafka import AIOKafkaConsumer, ConsumerRecord

from shared.config import Settings
from shared.messaging.kafka_security import client_options

EFFECT_COMMITTED = "EffectCommitted"


class Seen:
    """Event ids already processed, bounded: ids arrive roughly in time order (UUIDv7), and a
    redelivery is never far behind the first copy, so the oldest ids are forgotten first."""

    def __init__(self, capacity: int = 100_000) -> None:
        self._ids: dict[str, None] = {}
        self._capacity = capacity

    def first_time(self, event_id: str) -> bool:
        if event_id in self._ids:
            return False
        self._ids[event_id] = None
        if len(self._ids) > self._capacity:
            del self._ids[next(iter(self._ids))]
        return True


def event_id_of(record: ConsumerRecord, envelope: dict) -> str | None:
    """The header when present (no parsing needed to deduplicate), else the envelope's field."""
    for name, value in record.headers or ():
        if name == "event_id":
            return value.decode()
    return envelope.get("event_id")


def process(record: ConsumerRecord, seen: Seen) -> None:
    """Print one committed effect; skip copies already seen and records that are not ours."""
    try:
        envelope = json.loads(record.value or b"")
    except ValueError:
        print(f"skipped a record that is not JSON at {record.partition}:{record.offset}",
              file=sys.stderr)
        return
    if not isinstance(envelope, dict):
        return
    event_id = event_id_of(record, envelope)
    if envelope.get("event_type") != EFFECT_COMMITTED or not event_id:
        return
    if not seen.first_time(event_id):
        print(f"skipped a redelivered copy of {event_id}", file=sys.stderr)
        return
    effect = envelope["payload"]
    print(json.dumps({"event_id": event_id, "event_type": EFFECT_COMMITTED,
                      "operation_key": effect["operation_key"],
                      "logical_call_id": effect["logical_call_id"], "tool": effect["tool_name"],
                      "result": effect["result"], "committed_at": effect["committed_at"]}),
          flush=True)


async def subscribe(args: argparse.Namespace) -> int:
    consumer = AIOKafkaConsumer(
        args.topic, **client_options(Settings().endpoints.kafka_bootstrap), group_id=args.group,
        enable_auto_commit=False, auto_offset_reset=args.from_)
    seen, consumed = Seen(), 0
    deadline = time.monotonic() + args.timeout
    await consumer.start()
    try:
        while consumed < args.max_messages and (left := deadline - time.monotonic()) > 0:
            batch = await consumer.getmany(timeout_ms=int(min(left, 1.0) * 1000),
                                           max_records=args.max_messages - consumed)
            for records in batch.values():
                for record in records:
                    process(record, seen)
                    consumed += 1
            if batch:
                await consumer.commit()  # only what was processed above
    finally:
        await consumer.stop()
    print(f"consumed {consumed} records", file=sys.stderr)
    return 0


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topic", default="ledger.effects")
    parser.add_argument("--group", default="effects-subscriber-example",
                        help="this subscriber's own consumer group")
    parser.add_argument("--from", dest="from_", choices=("earliest", "latest"),
                        default="earliest", help="where a group without offsets starts")
    parser.add_argument("--max-messages", type=int, default=100,
                        help="stop after this many records (redelivered copies count)")
    parser.add_argument("--timeout", type=float, default=30.0, help="stop after this long (s)")
    return parser.parse_args()


if __name__ == "__main__":
    sys.exit(asyncio.run(subscribe(arguments())))
