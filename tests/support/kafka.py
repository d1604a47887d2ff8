"""Reading what actually reached Kafka, independent of any code under test."""

from __future__ import annotations

import asyncio
import re
import time
import uuid
from collections import defaultdict

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic


def unique_topic(prefix: str = "test") -> str:
    return f"{prefix}.{uuid.uuid4().hex[:10]}"


async def create_topic(bootstrap: str, topic: str, partitions: int = 4) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(topic, partitions, 1)])
    finally:
        await admin.close()


async def topic_exists(bootstrap: str, topic: str, *, timeout: float = 0.0) -> bool:
    """Whether ``topic`` exists (waiting up to ``timeout``), asked without naming it: a
    metadata request naming a topic makes the local broker auto-create it, with one partition,
    before the relay could create a tenant's topic with the family's partition count."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    deadline = time.monotonic() + timeout
    try:
        while topic not in await admin.list_topics():
            if time.monotonic() >= deadline:
                return False
            await asyncio.sleep(0.2)
        return True
    finally:
        await admin.close()


async def read_topic(bootstrap: str, topic: str, *, until: int, timeout: float = 60.0) -> list:
    """Every record from the beginning, stopping once ``until`` records arrived (or timeout);
    a topic that does not exist (yet) is waited for, never auto-created by reading it."""
    deadline = time.monotonic() + timeout
    if not await topic_exists(bootstrap, topic, timeout=timeout):
        return []
    consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=None,
                                auto_offset_reset="earliest", enable_auto_commit=False)
    await consumer.start()
    records: list = []
    try:
        while len(records) < until and time.monotonic() < deadline:
            batch = await consumer.getmany(timeout_ms=500, max_records=10_000)
            for partition_records in batch.values():
                records.extend(partition_records)
    finally:
        await consumer.stop()
    return records


def header(record, name: str) -> str | None:
    return next((value.decode() for key, value in record.headers if key == name), None)


def copies_per_event(records: list) -> dict[str, int]:
    counts: dict[str, int] = defaultdict(int)
    for record in records:
        counts[header(record, "event_id")] += 1
    return dict(counts)


async def wait_for(predicate, timeout: float = 60.0, interval: float = 0.1):
    """Poll an async predicate until it returns something truthy; wait on positions, not sleeps."""
    deadline = time.monotonic() + timeout
    while True:
        value = await predicate()
        if value or time.monotonic() > deadline:
            return value
        await asyncio.sleep(interval)


async def committed(bootstrap: str, group: str, topic: str, partitions: int) -> int:
    """The group's committed offsets on ``topic``, summed over its partitions: how many records
    a restarted member would not be given again."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        wanted = [TopicPartition(topic, partition) for partition in range(partitions)]
        offsets = await admin.list_consumer_group_offsets(group, partitions=wanted)
    finally:
        await admin.close()
    return sum(max(offsets[partition].offset, 0) for partition in wanted if partition in offsets)


async def topics_matching(bootstrap: str, pattern: re.Pattern[str]) -> list[str]:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        return sorted(topic for topic in await admin.list_topics() if pattern.match(topic))
    finally:
        await admin.close()


async def partition_count(bootstrap: str, topic: str) -> int:
    """Of a topic that exists (describing it by name would auto-create a missing one)."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        [described] = [t for t in await admin.describe_topics() if t["topic"] == topic]
        return len(described["partitions"])
    finally:
        await admin.close()
