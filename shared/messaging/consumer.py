"""The idempotent-consumer template every service uses to apply Kafka events.

For a batch of records, in ONE PostgreSQL transaction: decode each record (our envelope by
default; a service reading outside messages, like the intake, brings a decoder that names the
record's dedup id), insert inbox markers (event id = dedup key, so a republished copy at
another offset is still a duplicate; a handler whose own first write is keyed so is its own
inbox: ``inbox=False``),
apply the fresh ones through the service's handler (one call per event, or, for a handler
that works set-wise, one call for all of them), write any outbox rows the handler emits,
and commit. Only then may the caller commit Kafka offsets: offsets never run ahead of
durable state, so a crash anywhere before the commit redelivers the whole batch.

A record that cannot be applied (undecodable, or the handler raises a permanent error) is
written to ``dead_letters`` with its reason in the same transaction, so it never blocks the
partition and is never lost. To find it without giving up one-transaction batches, a failed
batch is retried one savepoint per record.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

import asyncpg
from aiokafka import ConsumerRecord

from shared import metric_catalog
from shared.db.unit_of_work import UnitOfWork
from shared.errors import PermanentError, is_retryable
from shared.logs import log_context
from shared.tracing import continuing
from shared.messaging.envelope import Envelope, decode

log = logging.getLogger(__name__)
Handler = Callable[[UnitOfWork, Any], Awaitable[None]]
BatchHandler = Callable[[UnitOfWork, list[Any]], Awaitable[set[uuid.UUID] | None]]
"""Applies every fresh event of a batch at once, in delivery order: a handler whose SQL is
set-based (the projection's) then costs a few statements per batch instead of per event.
A handler that deduplicates by itself (``inbox=False``) returns the ids it applied."""


class Identified(Protocol):
    """What a decoder yields: anything with the id the inbox deduplicates on."""

    event_id: uuid.UUID


Decoder = Callable[[ConsumerRecord], Identified]


def decode_envelope(record: ConsumerRecord) -> Envelope:
    """The default: our own events, deduplicated by the event id minted at the outbox."""
    return decode(record.value, record.headers)


@dataclass
class BatchReport:
    applied: int = 0
    duplicates: int = 0
    dead_lettered: list[str] = field(default_factory=list)
    created: list[tuple[str, datetime]] = field(default_factory=list)
    """(topic, occurred_at) of each applied event: how long its hop took, once committed."""

    def add(self, other: BatchReport) -> None:
        self.applied += other.applied
        self.duplicates += other.duplicates
        self.dead_lettered += other.dead_lettered

    def applied_one(self, record: ConsumerRecord, item: Identified) -> None:
        self.applied += 1
        if (occurred_at := getattr(item, "occurred_at", None)) is not None:
            self.created.append((record.topic, occurred_at))


Accepts = Mapping[str, frozenset[str]]
"""Per consumed topic, the event types that may arrive on it."""


class IdempotentConsumer:
    def __init__(self, name: str, schema: str, pool: asyncpg.Pool, handler: Handler | BatchHandler,
                 decoder: Decoder = decode_envelope, accepts: Accepts | None = None,
                 set_wise: bool = False, inbox: bool = True) -> None:
        """``set_wise``: ``handler`` is a ``BatchHandler``; a batch that fails permanently is
        then retried one event per call (``[event]``) to find the bad record.

        ``inbox=False``: the set-wise handler is its own inbox. Its first write is keyed by
        the event id (``ON CONFLICT DO NOTHING``) in this transaction and kept at least as long
        as an inbox row would be, and it returns the ids that write found new: the projection,
        whose history is kept for ever. An inbox marker would then be a second write of the
        same fact on every event."""
        if not inbox and not set_wise:
            raise ValueError("only a set-wise handler can deduplicate by itself")
        self.name = name
        self._set_wise = set_wise
        self._inbox = inbox
        self._accepts = accepts
        """A record of another type on a topic is dead-lettered, never handled: an approval
        topic that anyone may write to must not carry a forged ``ProposalAccepted``."""
        self._decoder = decoder
        self.schema = schema
        self._pool = pool
        self._handler = handler
        self.totals = BatchReport()
        """Committed outcomes since start: duplicates prevented is an operator metric."""

    async def process(self, records: Sequence[ConsumerRecord]) -> BatchReport:
        """Apply a batch exactly once per event id; raises only retryable errors."""
        try:
            report = await self._apply_batch(records, isolate=False)
        except Exception as error:
            if is_retryable(error):
                raise
            log.warning("%s: batch failed (%s); isolating the bad record", self.name, error)
            report = await self._apply_batch(records, isolate=True)
        self.totals.add(report)
        _count(self.name, report)
        return report

    async def _apply_batch(self, records: Sequence[ConsumerRecord], isolate: bool) -> BatchReport:
        report = BatchReport()
        decoded: list[tuple[ConsumerRecord, Identified | PermanentError]] = []
        for record in records:
            try:
                decoded.append((record, self._admitted(record, self._decoder(record))))
            except PermanentError as error:
                decoded.append((record, error))
        async with UnitOfWork(self._pool, self.schema) as uow:
            ids = [item.event_id for _, item in decoded if not isinstance(item, PermanentError)]
            fresh = await uow.claim(self.name, ids) if self._inbox else set(ids)
            together: list[tuple[ConsumerRecord, Identified]] = []
            for record, item in decoded:
                if isinstance(item, PermanentError):
                    await self._dead_letter(uow, record, None, str(item), report)
                elif item.event_id not in fresh:
                    report.duplicates += 1
                elif isolate:
                    await self._apply_isolated(uow, record, item, report)
                    fresh.discard(item.event_id)
                elif self._set_wise:
                    together.append((record, item))
                    fresh.discard(item.event_id)
                else:
                    with _applying(record, item):
                        await self._handler(uow, item)
                    fresh.discard(item.event_id)  # a second copy in this batch is a duplicate
                    report.applied_one(record, item)
            if together:
                applied = await self._handler(uow, [item for _, item in together])
                for record, item in together:
                    self._counted(report, record, item, applied)
            await uow.commit()
        return report

    def _admitted(self, record: ConsumerRecord, item: Identified) -> Identified:
        allowed = self._accepts.get(record.topic) if self._accepts is not None else None
        kind = getattr(item, "event_type", None)
        if self._accepts is not None and (allowed is None or kind not in allowed):
            raise PermanentError(f"{kind} is not accepted on {record.topic}")
        return item

    async def _apply_isolated(self, uow: UnitOfWork, record: ConsumerRecord,
                              envelope: Identified, report: BatchReport) -> None:
        try:
            async with uow.savepoint():
                with _applying(record, envelope):
                    applied = await self._handler(uow, [envelope] if self._set_wise else envelope)
            self._counted(report, record, envelope, applied)
        except Exception as error:
            if is_retryable(error):
                raise
            await self._dead_letter(uow, record, envelope, f"{type(error).__name__}: {error}", report)

    def _counted(self, report: BatchReport, record: ConsumerRecord, item: Identified,
                 applied: set[uuid.UUID] | None) -> None:
        """``applied``: what a handler that is its own inbox applied (None: everything)."""
        if self._inbox or item.event_id in (applied or ()):
            report.applied_one(record, item)
        else:
            report.duplicates += 1

    async def _dead_letter(self, uow: UnitOfWork, record: ConsumerRecord,
                           envelope: Identified | None, reason: str, report: BatchReport) -> None:
        log.error("%s: dead-lettering %s[%d]@%d: %s", self.name, record.topic,
                  record.partition, record.offset, reason)
        await uow.connection.execute(
            f'INSERT INTO "{self.schema}".dead_letters (consumer, topic, kafka_partition, '
            "kafka_offset, event_id, reason, headers, value) VALUES ($1, $2, $3, $4, $5, $6, $7, $8) "
            "ON CONFLICT DO NOTHING",
            self.name, record.topic, record.partition, record.offset,
            envelope.event_id if envelope else None, reason,
            _headers_json(record.headers), record.value,
        )
        report.dead_lettered.append(reason)


_APPLIED = metric_catalog.counter("consumer.applied")
_DUPLICATES = metric_catalog.counter("consumer.duplicates_prevented")
_DEAD_LETTERED = metric_catalog.counter("consumer.dead_lettered")
_LATENCY = metric_catalog.histogram("consumer.delivery_latency")


def _count(consumer: str, report: BatchReport) -> None:
    """Committed outcomes only: ``process`` returns after its transaction committed."""
    attributes = {"consumer": consumer}
    _APPLIED.add(report.applied, attributes)
    _DUPLICATES.add(report.duplicates, attributes)
    _DEAD_LETTERED.add(len(report.dead_lettered), attributes)
    now = datetime.now(UTC)
    for topic, occurred_at in report.created:
        _LATENCY.record(max((now - occurred_at).total_seconds() * 1000, 0.0),
                        {"consumer": consumer, "topic": topic})


@contextmanager
def _applying(record: ConsumerRecord, item: Identified) -> Iterator[None]:
    """Every log line a handler writes names the run, the event and the business intent, and
    its work is a span continuing the trace the event carries (so do the events it emits)."""
    payload = getattr(item, "payload", None) or {}
    with log_context(run_id=getattr(item, "run_id", None), event_id=item.event_id,
                     operation_key=payload.get("operation_key")), \
            continuing(getattr(item, "traceparent", None), f"{record.topic} process",
                       **{"messaging.destination.name": record.topic,
                          "messaging.message.id": str(item.event_id)}):
        yield


def _headers_json(headers: Sequence[tuple[str, bytes]] | None) -> str:
    return json.dumps({name: value.decode(errors="replace") for name, value in headers or []})
