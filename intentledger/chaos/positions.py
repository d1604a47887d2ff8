"""Kafka positions the runner reads: where each topic stood when the scenario began (to read or
redeliver what the scenario produced) and how far each consumer group is behind (quiescence)."""

from __future__ import annotations

import re
from collections.abc import Iterable

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRecord, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient

from shared.messaging.kafka_security import client_options

Offsets = dict[TopicPartition, int]


class Positions:
    def __init__(self, bootstrap: str) -> None:
        self._bootstrap = bootstrap
        self.start: Offsets = {}

    async def mark_start(self) -> None:
        """Remember the end of every partition of every topic now."""
        self.start = await self.ends(await self.topics())

    async def topics(self, pattern: re.Pattern[str] | None = None) -> list[str]:
        """Every topic now (matching ``pattern``): a tenant's results topic may appear during
        the scenario, and is then read from its beginning."""
        admin = AIOKafkaAdminClient(**client_options(self._bootstrap))
        await admin.start()
        try:
            topics = await admin.list_topics()
        finally:
            await admin.close()
        return sorted(topic for topic in topics if pattern is None or pattern.match(topic))

    async def ends(self, topics: Iterable[str]) -> Offsets:
        return (await self._bounds(topics))[1]

    async def _bounds(self, topics: Iterable[str]) -> tuple[Offsets, Offsets]:
        """The first and the next offset of every partition of ``topics``."""
        topics = set(topics)
        admin = AIOKafkaAdminClient(**client_options(self._bootstrap))
        await admin.start()
        try:
            described = await admin.describe_topics(sorted(topics)) if topics else []
        finally:
            await admin.close()
        partitions = [TopicPartition(topic["topic"], p["partition"]) for topic in described
                      for p in topic["partitions"]]
        if not partitions:
            return {}, {}
        consumer = AIOKafkaConsumer(**client_options(self._bootstrap), enable_auto_commit=False)
        await consumer.start()
        try:
            consumer.assign(partitions)  # the client fetches metadata (leaders) only for these
            return (await consumer.beginning_offsets(partitions),
                    await consumer.end_offsets(partitions))
        finally:
            await consumer.stop()

    async def since_start(self, *topics: str) -> list[ConsumerRecord]:
        """Every record ``topics`` received since ``mark_start``, in partition order."""
        begin = {tp: offset for tp, offset in self.start.items() if tp.topic in topics}
        end = await self.ends(topics)
        wanted = {tp: (begin.get(tp, 0), stop) for tp, stop in end.items() if stop > begin.get(tp, 0)}
        if not wanted:
            return []
        consumer = AIOKafkaConsumer(**client_options(self._bootstrap), enable_auto_commit=False)
        await consumer.start()
        records: list[ConsumerRecord] = []
        try:
            consumer.assign(list(wanted))
            for tp, (first, _) in wanted.items():
                consumer.seek(tp, first)
            left = dict(wanted)
            while left:
                batch = await consumer.getmany(*left, timeout_ms=2000)
                if not batch:
                    raise RuntimeError(f"{', '.join(topics)}: records below the end offset "
                                       "could not be read")
                for tp, items in batch.items():
                    records.extend(r for r in items if r.offset < left[tp][1])
                    if items and items[-1].offset + 1 >= left[tp][1]:
                        del left[tp]
        finally:
            await consumer.stop()
        return records

    async def republish(self, records: list[ConsumerRecord]) -> None:
        """The same bytes, key and headers again: to a consumer, a redelivery."""
        producer = AIOKafkaProducer(**client_options(self._bootstrap), acks="all",
                                    enable_idempotence=True)
        await producer.start()
        try:
            for record in records:
                await producer.send_and_wait(record.topic, record.value, key=record.key,
                                             headers=list(record.headers),
                                             partition=record.partition)
        finally:
            await producer.stop()

    async def lag(self, groups: Iterable[str]) -> dict[str, int]:
        """Per consumer group, records it has not yet committed (our consumers commit only what
        they applied) in the topics that received records since ``mark_start``; a group's
        offsets in topics nobody wrote to since (another deployment's, a test's) are not this
        scenario's business. A partition the group never committed counts from its first
        record: with ``auto_offset_reset=earliest`` it reads them all."""
        admin = AIOKafkaAdminClient(**client_options(self._bootstrap))
        await admin.start()
        try:
            committed = {group: await admin.list_consumer_group_offsets(group) for group in groups}
        finally:
            await admin.close()
        topics = {tp.topic for offsets in committed.values() for tp in offsets}
        first, end = await self._bounds(topics)
        written = {tp.topic for tp, stop in end.items() if stop > self.start.get(tp, 0)}
        lags: dict[str, int] = {}
        for group, offsets in committed.items():
            read = {tp.topic for tp in offsets} & written
            lags[group] = sum(
                max(stop - (offsets[tp].offset if tp in offsets and offsets[tp].offset >= 0
                            else first[tp]), 0)
                for tp, stop in end.items() if tp.topic in read)
        return lags
