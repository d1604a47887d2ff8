"""The projection on real Kafka and PostgreSQL: per-test ledger topics, events published straight
to them as the intake, the policy and the dispatcher would, and the read models read back —
from the live ``projection`` schema (shared by tests: assert per run) and from a clean rebuild
of the same events into a scratch schema."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient

from services.projection.facts import Delivery
from services.projection.main import run_projection
from services.projection.replay import Snapshot, create_scratch, drop_scratch, rebuild, snapshot
from services.projection.repository import SCHEMA
from services.projection.settings import ProjectionSettings
from shared.config import Endpoints, Settings
from shared.messaging.consumer import BatchReport
from tests.support.kafka import create_topic, unique_topic, wait_for
from tests.support.projection_events import Published

PARTITIONS = 4


@dataclass
class LedgerTopics:
    intake: str = field(default_factory=lambda: unique_topic("ledger.intake"))
    authorizations: str = field(default_factory=lambda: unique_topic("ledger.authorizations"))
    dispatch: str = field(default_factory=lambda: unique_topic("ledger.dispatch"))
    effects: str = field(default_factory=lambda: unique_topic("ledger.effects"))

    def of(self, role: str) -> str:
        return getattr(self, role)

    def settings(self) -> ProjectionSettings:
        return ProjectionSettings(intake_topic=self.intake,
                                  authorizations_topic=self.authorizations,
                                  dispatch_topic=self.dispatch, effects_topic=self.effects)

    def env(self) -> dict[str, str]:
        """The same settings for a projection run as a process."""
        return {f"INTENTLEDGER_PROJECTION_{name.upper()}_TOPIC": getattr(self, name)
                for name in ("intake", "authorizations", "dispatch", "effects")}

    async def create(self, bootstrap: str) -> None:
        for topic in (self.intake, self.authorizations, self.dispatch, self.effects):
            await create_topic(bootstrap, topic, partitions=PARTITIONS)

    def deliveries(self, events: Iterable[Published]) -> list[Delivery]:
        return [Delivery(self.of(event.role), event.envelope) for event in events]


async def publish(bootstrap: str, topics: LedgerTopics, events: Iterable[Published]) -> None:
    """In the given order, keyed by run id (so each run's events keep it per topic)."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", enable_idempotence=True,
                                linger_ms=5)
    await producer.start()
    try:
        sent = [await producer.send(
            topics.of(event.role), event.envelope.value(), key=event.envelope.run_id.encode(),
            headers=[(name, value.encode()) for name, value in event.envelope.headers().items()])
            for event in events]
        await asyncio.gather(*sent)
    finally:
        await producer.stop()


class ProjectionRun:
    totals: BatchReport | None = None


@asynccontextmanager
async def projecting(endpoints: Endpoints, topics: LedgerTopics) -> AsyncIterator[ProjectionRun]:
    """The projection service in this event loop; its committed totals once it stopped."""
    run, stopping = ProjectionRun(), asyncio.Event()
    settings = Settings(kafka_bootstrap=endpoints.kafka_bootstrap,
                        database_url=endpoints.database_url)
    task = asyncio.create_task(run_projection(settings, topics.settings(), stopping))
    try:
        yield run
    finally:
        stopping.set()
        run.totals = (await task).totals


async def applied(pool, events: Iterable[Published], timeout: float = 120.0) -> bool:
    """Every one of these events is in the history (waits on positions, not on time)."""
    ids = list({event.envelope.event_id for event in events})

    async def all_there():
        return await pool.fetchval(f"SELECT count(*) FROM {SCHEMA}.events"
                                   " WHERE event_id = ANY($1::uuid[])", ids) == len(ids)
    return await wait_for(all_there, timeout=timeout, interval=0.3)


async def live(pool, run_ids: list[str]) -> Snapshot:
    async with pool.acquire() as conn:
        return await snapshot(conn, SCHEMA, run_ids)


async def clean(pool, deliveries: list[Delivery], run_ids: list[str]) -> Snapshot:
    """The read models a clean rebuild of exactly these events gives, in this order."""
    scratch = await create_scratch(pool)
    try:
        await rebuild(pool, scratch, _each(deliveries))
        async with pool.acquire() as conn:
            return await snapshot(conn, scratch, run_ids)
    finally:
        await drop_scratch(pool, scratch)


async def written(pool, run_ids: list[str]) -> int:
    """How many records the projection wrote to its outbox for these runs: none, it tells no
    one anything (each service announces what it decides, in the transaction that decides it)."""
    return await pool.fetchval(f"SELECT count(*) FROM {SCHEMA}.outbox"
                               " WHERE partition_key = ANY($1::text[])", run_ids)


async def stored_as_sent(pool, events: Iterable[Published]) -> int:
    """How many of these events the history holds exactly in their JSON form, envelope and
    columns: what a replay reads back and an auditor queries."""
    events = list(events)
    return await pool.fetchval(
        f"SELECT count(*) FROM {SCHEMA}.events e JOIN unnest($1::uuid[], $2::jsonb[]) AS"
        " sent(event_id, envelope) USING (event_id) WHERE e.envelope = sent.envelope"
        " AND e.occurred_at = (sent.envelope->>'occurred_at')::timestamptz"
        " AND e.event_type = sent.envelope->>'event_type' AND e.run_id = sent.envelope->>'run_id'",
        [event.envelope.event_id for event in events],
        [json.dumps(event.envelope.model_dump(mode="json")) for event in events])


async def run_status(pool, run_id: str) -> str | None:
    return await pool.fetchval(f"SELECT status FROM {SCHEMA}.runs WHERE run_id = $1", run_id)


async def _each(deliveries: list[Delivery]) -> AsyncIterator[Delivery]:
    for delivery in deliveries:
        yield delivery


async def caught_up(bootstrap: str, topics: LedgerTopics, timeout: float = 120.0) -> bool:
    """The projection's consumer group has committed every offset of these topics: every copy
    of every record, duplicates included, went through a committed batch. A partition that was
    given no record has nothing to commit (Kafka answers -1 for it): its end, 0, is reached.
    Run ids are random, so a topic with few runs leaves one empty now and then."""
    ledger = [topics.intake, topics.authorizations, topics.dispatch, topics.effects]
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None)
    await admin.start()
    await consumer.start()
    try:
        partitions = [TopicPartition(topic, p) for topic in ledger for p in range(PARTITIONS)]
        ends = await consumer.end_offsets(partitions)

        async def committed():
            offsets = await admin.list_consumer_group_offsets("projection", partitions=partitions)
            return all(max(offsets[tp].offset if tp in offsets else 0, 0) >= ends[tp]
                       for tp in partitions)
        return await wait_for(committed, timeout=timeout, interval=0.3)
    finally:
        await consumer.stop()
        await admin.close()


async def group_members(bootstrap: str, at_least: int = 2, timeout: float = 60.0) -> int:
    """How many members the projection's consumer group has, once it has ``at_least``."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        async def members():
            [response] = await admin.describe_consumer_groups(["projection"])
            [group] = response.to_object()["groups"]
            count = len(group["members"]) if group["state"] == "Stable" else 0
            return count if count >= at_least else 0
        return await wait_for(members, timeout=timeout, interval=0.3)
    finally:
        await admin.close()
