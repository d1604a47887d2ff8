"""Where work waits in the pipeline: the consumer lag of every group (Kafka positions) and the
outbox rows the relay has not published yet (PostgreSQL)."""

from __future__ import annotations

import asyncio

import asyncpg
from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient

from bench.e2e.pipeline import GROUP_TOPICS, OUTBOX_SCHEMAS
from shared.messaging.kafka_security import client_options


class Backlog:
    """Consumer lag per group (end offset minus committed offset, over the topics it applies),
    read through one admin client and one paused consumer that never fetches records."""

    def __init__(self, bootstrap: str) -> None:
        self._bootstrap = bootstrap

    async def start(self) -> None:
        self._admin = AIOKafkaAdminClient(**client_options(self._bootstrap))
        await self._admin.start()
        topics = sorted({topic for topics in GROUP_TOPICS.values() for topic in topics})
        described = await self._admin.describe_topics(topics)
        self._partitions = [TopicPartition(t["topic"], p["partition"]) for t in described
                            for p in t["partitions"] if not t.get("error_code")]
        self._consumer = AIOKafkaConsumer(**client_options(self._bootstrap), group_id=None,
                                          enable_auto_commit=False)
        await self._consumer.start()
        self._consumer.assign(self._partitions)
        self._consumer.pause(*self._partitions)  # positions only: never fetch a record
        self._first = await self._consumer.beginning_offsets(self._partitions)

    async def stop(self) -> None:
        await self._consumer.stop()
        await self._admin.close()

    async def partitions(self, topic: str) -> list[TopicPartition]:
        [described] = await self._admin.describe_topics([topic])
        return [TopicPartition(topic, p["partition"]) for p in described["partitions"]]

    async def lag(self) -> dict[str, int]:
        ends = await self._consumer.end_offsets(self._partitions)
        committed = await asyncio.gather(*(self._admin.list_consumer_group_offsets(group)
                                           for group in GROUP_TOPICS))
        lags = {}
        for (group, topics), offsets in zip(GROUP_TOPICS.items(), committed, strict=True):
            behind = 0
            for tp, end in ends.items():
                if tp.topic not in topics:
                    continue
                at = offsets[tp].offset if tp in offsets and offsets[tp].offset >= 0 \
                    else self._first.get(tp, 0)
                behind += max(end - at, 0)
            lags[group] = behind
        return lags


async def outbox_pending(pool: asyncpg.Pool) -> dict[str, int]:
    """Pending outbox rows per schema."""
    rows = await pool.fetch(" UNION ALL ".join(
        f"SELECT '{schema}' AS schema, count(*) AS n FROM \"{schema}\".outbox "
        "WHERE status = 'pending'" for schema in OUTBOX_SCHEMAS))
    return {row["schema"]: row["n"] for row in rows}
