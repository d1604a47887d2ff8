"""Samples the positions the operator console charts over the last hour: each
outbox's pending rows and each consumer group's lag, into ``projection.health_samples``.

They are "now" values (Kafka and the outboxes keep no history of them), so someone has to
write them down; the projection does, because it already reaches both Kafka and every schema
and its query API is the console's only data source. Replicas sample the same rounded instant
and keep one row; a failed sample is logged and skipped, never fatal: the charts get a gap,
the projection keeps projecting.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from datetime import UTC, datetime

import asyncpg
from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.errors import KafkaError

from shared.db.identifiers import checked_identifier
from shared.topology import SERVICE_GROUPS
from shared.messaging.kafka_security import client_options
from shared.messaging.outbox import outbox_schemas

log = logging.getLogger(__name__)
TOTAL = "all"
RETENTION = "2 hours"
"""Samples older than this are deleted: the console charts one hour."""


async def sample_relay_backlog(conn: asyncpg.Connection) -> dict[str, float]:
    """Pending rows of every outbox together (subject ``all``, always written) and of each
    outbox that has any, in one statement: a chart of dozens of flat zero lines says less
    than one total."""
    schemas = await outbox_schemas(conn)
    if not schemas:
        return {TOTAL: 0.0}
    counts = " UNION ALL ".join(
        f"SELECT {index} AS outbox, count(*) AS pending FROM \"{checked_identifier(schema)}\".outbox "
        "WHERE status = 'pending'" for index, schema in enumerate(schemas))
    pending = {schemas[row["outbox"]]: float(row["pending"]) for row in await conn.fetch(counts)}
    return {TOTAL: sum(pending.values())} | {schema: n for schema, n in pending.items() if n}


async def sample_consumer_lag(admin: AIOKafkaAdminClient, consumer: AIOKafkaConsumer,
                              groups: Iterable[str]) -> dict[str, float]:
    """Per group, records its partitions hold beyond its committed offsets (our consumers
    commit only what they applied). A group that has committed nothing yet is left out: it
    has not started, and its lag is not a position anyone chose."""
    committed: dict[str, dict[TopicPartition, int]] = {}
    for group in groups:
        offsets = await admin.list_consumer_group_offsets(group)
        if offsets:
            committed[group] = {tp: meta.offset for tp, meta in offsets.items() if meta.offset >= 0}
    partitions = sorted({tp for offsets in committed.values() for tp in offsets})
    if not partitions:
        return {}
    consumer.assign(partitions)  # a consumer knows the leaders of its assigned partitions only
    consumer.pause(*partitions)  # for their end offsets: an assigned partition is fetched, all of it
    ends = await consumer.end_offsets(partitions)
    return {group: float(sum(max(ends[tp] - offset, 0) for tp, offset in offsets.items()))
            for group, offsets in committed.items()}


async def record(conn: asyncpg.Connection, metric: str, values: dict[str, float],
                 bucket: datetime) -> None:
    await conn.execute(
        "INSERT INTO projection.health_samples (metric, subject, bucket, value) "
        "SELECT $1, s.subject, $2, s.value FROM unnest($3::text[], $4::float8[]) AS s(subject, value) "
        "ON CONFLICT DO NOTHING", metric, bucket, list(values), list(values.values()))


def bucket_of(moment: datetime, every_s: float) -> datetime:
    """The sampling interval ``moment`` falls in, so replicas agree on one instant."""
    seconds = moment.timestamp()
    return datetime.fromtimestamp(seconds - seconds % every_s, UTC)


class HealthSampler:
    def __init__(self, pool: asyncpg.Pool, bootstrap: str, every_s: float,
                 groups: Iterable[str] = SERVICE_GROUPS) -> None:
        self._pool, self._bootstrap, self._every_s = pool, bootstrap, every_s
        self._groups = tuple(groups)

    async def run(self, halt: asyncio.Event) -> None:
        clients: tuple[AIOKafkaAdminClient, AIOKafkaConsumer] | None = None
        try:
            while not halt.is_set():
                try:
                    clients = clients or await self._kafka_clients()
                    await self.sample_once(*clients)
                except Exception:  # noqa: BLE001 - a sample must never stop the projection
                    log.exception("health sample skipped")
                try:
                    await asyncio.wait_for(halt.wait(), self._every_s)
                except TimeoutError:
                    pass
        finally:
            if clients is not None:
                await clients[1].stop()
                await clients[0].close()

    async def sample_once(self, admin: AIOKafkaAdminClient, consumer: AIOKafkaConsumer,
                          now: datetime | None = None) -> None:
        """Both positions at one instant; without Kafka, the backlog is still written."""
        bucket = bucket_of(now or datetime.now(UTC), self._every_s)
        try:
            lags: dict[str, float] | None = await sample_consumer_lag(admin, consumer, self._groups)
        except KafkaError as error:
            log.warning("consumer lag not sampled: %s", error)
            lags = None
        async with self._pool.acquire() as conn, conn.transaction():
            await record(conn, "relay_backlog", await sample_relay_backlog(conn), bucket)
            if lags is not None:
                await record(conn, "consumer_lag", lags, bucket)
            await conn.execute("DELETE FROM projection.health_samples "
                               f"WHERE bucket < now() - interval '{RETENTION}'")

    async def _kafka_clients(self) -> tuple[AIOKafkaAdminClient, AIOKafkaConsumer]:
        admin = AIOKafkaAdminClient(**client_options(self._bootstrap))
        consumer = AIOKafkaConsumer(**client_options(self._bootstrap), enable_auto_commit=False)
        await admin.start()
        try:
            await consumer.start()
        except BaseException:
            await admin.close()
            raise
        return admin, consumer


@asynccontextmanager
async def sampling(pool: asyncpg.Pool, bootstrap: str, every_s: float) -> AsyncIterator[list]:
    """Runs beside the projection's consumer; not vital (yields no task to watch)."""
    halt = asyncio.Event()
    task = asyncio.create_task(HealthSampler(pool, bootstrap, every_s).run(halt))
    try:
        yield []
    finally:
        halt.set()
        await asyncio.gather(task, return_exceptions=True)
