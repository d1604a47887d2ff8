"""Publishing a claimed batch to Kafka with the durability the outbox promises.

aiokafka defaults to ``acks=1`` without idempotence; both are set explicitly here. With
idempotence the broker drops the producer's own internal retries as duplicates and keeps
per-partition order, so at-least-once duplicates come only from relay restarts.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from aiokafka import AIOKafkaProducer

from services.relay.records import KafkaRecord
from shared.errors import is_retryable


@dataclass
class BatchOutcome:
    published: list[int] = field(default_factory=list)
    permanent: dict[int, str] = field(default_factory=dict)
    transient: BaseException | None = None
    """The first retryable failure; rows neither published nor permanent stay pending."""


def new_producer(bootstrap: str, max_message_bytes: int) -> AIOKafkaProducer:
    return AIOKafkaProducer(
        bootstrap_servers=bootstrap,
        acks="all",
        enable_idempotence=True,
        linger_ms=5,
        max_batch_size=256 * 1024,
        max_request_size=max_message_bytes + 64 * 1024,
        request_timeout_ms=15_000,
        client_id="intentledger-relay",
    )


async def publish(producer: AIOKafkaProducer, records: list[KafkaRecord]) -> BatchOutcome:
    """Send in position order; stop sending at the first transient failure."""
    outcome = BatchOutcome()
    in_flight: list[tuple[int, asyncio.Future]] = []
    for record in records:
        try:
            future = await producer.send(record.topic, record.value, key=record.key,
                                         headers=record.headers)
        except Exception as error:  # noqa: BLE001 - classified below, nothing swallowed
            if not is_retryable(error):
                outcome.permanent[record.position] = f"{type(error).__name__}: {error}"
                continue
            outcome.transient = error
            break
        in_flight.append((record.position, future))
    results = await asyncio.gather(*(future for _, future in in_flight), return_exceptions=True)
    for (position, _), result in zip(in_flight, results, strict=True):
        if not isinstance(result, BaseException):
            outcome.published.append(position)
        elif is_retryable(result):
            outcome.transient = outcome.transient or result
        else:
            outcome.permanent[position] = f"{type(result).__name__}: {result}"
    return outcome
