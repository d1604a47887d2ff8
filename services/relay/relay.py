"""The relay loop: find outboxes with pending rows, claim a batch, publish it, mark it, repeat.

One worker takes an outbox while its batches are partial, more join while they are full;
workers in this process and in other replicas lock different shards (see ``claims``). The
crash point ``relay.after_publish_before_mark`` sits between the broker's acknowledgement and
the database commit: a crash there republishes the batch, which is what at-least-once means.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Callable

import asyncpg
from services.relay import claims
from services.relay.metrics import RelayMetrics
from services.relay.publisher import ProducerHandle, publish
from services.relay.records import KafkaRecord, Unpublishable, to_record
from services.relay.settings import RelaySettings
from services.relay.topics import TopicCreator
from shared import faults
from shared.errors import is_retryable
from shared.messaging.outbox import outbox_schemas
from shared.retry import backoff_delay

log = logging.getLogger(__name__)
BATCHES_PER_TURN = 20
"""A worker moves on after this many batches so one busy outbox cannot starve the others."""


class Relay:
    def __init__(self, pool: asyncpg.Pool, producers: ProducerHandle,
                 settings: RelaySettings, metrics: RelayMetrics | None = None,
                 topics: TopicCreator | None = None) -> None:
        self._pool = pool
        self._topics = topics
        self._producers = producers
        self._settings = settings
        self.metrics = metrics or RelayMetrics()
        self._work: asyncio.Queue[str] = asyncio.Queue()
        self._queued: set[str] = set()
        """Outboxes waiting in the queue (each at most once)."""
        self._active: Counter[str] = Counter()
        """Workers publishing each outbox now. One while its batches are partial; another joins
        whenever a batch is full, up to every worker (they lock different shards)."""
        self._seen_again: set[str] = set()
        """Outboxes a scan found pending while a worker was on them: rows may have arrived after
        its last claim, so it must look once more instead of letting the outbox go."""
        self._schemas: list[str] = list(settings.schemas or [])

    async def scan(self) -> int:
        """Queue every outbox with pending rows; returns how many were found."""
        async with self._pool.acquire() as conn:
            if not self._schemas:
                await self._discover_schemas(conn)
            found = await claims.outboxes_with_pending_rows(conn, self._schemas)
        for schema in found:
            self._pending(schema)
        return len(found)

    def notified(self, schema: str) -> bool:
        """An outbox's insert trigger said it has a new row: queue it without a scan. False
        when the outbox is not one this relay drains as far as it knows (a new one appears
        only with a migration: the caller rescans)."""
        if schema not in self._schemas:
            return False
        self._pending(schema)
        return True

    def _pending(self, schema: str) -> None:
        if self._active[schema]:
            self._seen_again.add(schema)
        else:
            self._offer(schema)

    def _offer(self, schema: str) -> None:
        """Queue the outbox for one more worker, unless one is already waiting for it."""
        if schema not in self._queued and self._active[schema] < self._settings.workers:
            self._queued.add(schema)
            self._work.put_nowait(schema)

    async def _discover_schemas(self, conn: asyncpg.Connection) -> list[str]:
        """The configured outboxes, else every one in the database; refreshed by the backlog
        gauge and the purge, not on every scan (a new outbox appears only with a migration)."""
        self._schemas = list(self._settings.schemas or await outbox_schemas(conn))
        return self._schemas

    async def worker(self, stopping: asyncio.Event) -> None:
        failures = 0
        while not stopping.is_set():
            try:
                schema = await asyncio.wait_for(self._work.get(), 0.2)
            except TimeoutError:
                continue
            self._queued.discard(schema)
            self._active[schema] += 1
            self._seen_again.discard(schema)  # this turn's first claim will see them
            more = False
            try:
                for _ in range(BATCHES_PER_TURN):
                    more = await self.relay_batch(schema, on_full=lambda schema=schema: self._offer(schema)) \
                        == self._settings.batch_size
                    if stopping.is_set() or not more:
                        break
                failures = 0
            except Exception as error:
                if not is_retryable(error):
                    raise
                failures += 1
                log.warning("relay %s: %s; backing off", schema, error)
                await asyncio.sleep(backoff_delay(failures))
                more = True
            finally:
                self._active[schema] -= 1
            if more or schema in self._seen_again:
                self._offer(schema)  # back of the queue: fairness

    async def relay_batch(self, schema: str, on_full: Callable[[], None] = lambda: None) -> int:
        """Publish one batch of one outbox; returns rows handled (0 = nothing to do here).
        ``on_full`` is told, before publishing, that the batch took all it could."""
        async with self._pool.acquire() as conn, conn.transaction():
            rows = await claims.claim_batch(conn, schema, self._settings.batch_size)
            if len(rows) == self._settings.batch_size:
                on_full()
            if not rows:
                return 0
            checked = [to_record(row, self._settings.max_message_bytes) for row in rows]
            records = [item for item in checked if isinstance(item, KafkaRecord)]
            rejected = {item.position: item.reason for item in checked
                        if isinstance(item, Unpublishable)}
            producer = self._producers.current
            # Bounded: during a broker outage the producer would wait for ever, holding this
            # transaction (row locks, the shard locks) and blocking shutdown.
            outcome = await asyncio.wait_for(self._publish(producer, records),
                                             self._settings.publish_timeout_s)
            await faults.hit("relay.after_publish_before_mark")
            rejected.update(outcome.permanent)
            if rejected:
                log.error("parking %d outbox rows in %s: %s", len(rejected), schema,
                          sorted(rejected.items())[:3])
                await claims.park(conn, schema, list(rejected), list(rejected.values()))
            lags = await claims.mark_published(conn, schema, outcome.published)
        self.metrics.record_batch(lags, len(rejected))
        if outcome.transient is not None:
            await self._producers.replace_if_broken(producer, outcome.transient)
            raise outcome.transient  # what was published is committed; the rest waits
        return len(rows)

    async def _publish(self, producer, records: list[KafkaRecord]):
        if self._topics is not None:
            await self._topics.ensure(record.topic for record in records)  # a new tenant's
        return await publish(producer, records)

    async def refresh_backlog(self) -> None:
        async with self._pool.acquire() as conn:
            schemas = await self._discover_schemas(conn)
            self.metrics.backlog = {s: await claims.backlog(conn, s) for s in schemas}

    async def purge_published(self) -> int:
        async with self._pool.acquire() as conn:
            schemas = await self._discover_schemas(conn)
            return sum([await claims.delete_published_before(conn, s, self._settings.retention_hours)
                        for s in schemas])
