"""Reading the tenant's results topic: one reader per partition that a run of this client goes
to, and nothing else of it (no other partition, no other tenant's topic).

Each reader is a consumer assigned its one partition directly: no consumer group, so an
agent's Kafka user needs nothing but Read on its tenant's topic, and no offsets are committed
(an answer is the agent's to keep, in a ``Handle``). A reader is positioned at the end of its
partition before the first proposal that needs it is sent, so no answer can slip past. A
tenant's topic is created when its first answer is written: while it does not exist, a reader
waits for it and then reads it from the beginning (everything in a topic created after it
looked was written after it looked).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterable
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient

from intentledger_client.routing import Call, Router

NEW_TOPIC_POLL_S = 0.2
READ_RETRY_S = 1.0


class PartitionReader:
    def __init__(self, consumer: AIOKafkaConsumer, partition: TopicPartition,
                 router: Router) -> None:
        self._consumer = consumer
        self.partition = partition
        self._router = router
        self.next_offset = 0
        """Every record before it has been routed; every one from it on will be."""
        self._task: asyncio.Task[None] | None = None

    async def start(self, *, at_end: bool) -> None:
        try:
            await self._consumer.start()
            self._consumer.assign([self.partition])
            if at_end:
                await self._consumer.seek_to_end(self.partition)
            else:
                await self._consumer.seek_to_beginning(self.partition)
            self.next_offset = await self._consumer.position(self.partition)
        except BaseException:
            await self._consumer.stop()
            raise
        self._task = asyncio.create_task(self._read(), name=f"read {self.partition}")

    async def _read(self) -> None:
        """Until stopped. A fetch that fails is tried again (aiokafka reconnects by itself): a
        reader that ended would leave every call of its partition pending for ever."""
        while True:
            try:
                batch = await self._consumer.getmany(self.partition, timeout_ms=500)
            except asyncio.CancelledError:
                raise
            except Exception:  # noqa: BLE001 - the partition's calls still wait on it
                await asyncio.sleep(READ_RETRY_S)
                continue
            for record in batch.get(self.partition, ()):
                self._router.route(record.offset, record.value)
                self.next_offset = record.offset + 1

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        await self._consumer.stop()


async def catch_up(consumer: AIOKafkaConsumer, partition: TopicPartition, router: Router,
                   calls: Iterable[Call], start: int, end: int) -> None:
    """Offer ``calls`` the records of ``partition`` in [start, end): what went by before they
    were registered (a resumed handle, a duplicate's original). Records from ``end`` on are
    the live reader's."""
    calls = list(calls)
    try:
        await consumer.start()
        consumer.assign([partition])
        consumer.seek(partition, start)
        while await consumer.position(partition) < end:
            batch = await consumer.getmany(partition, timeout_ms=500)
            for record in batch.get(partition, ()):
                if record.offset >= end:
                    return
                router.route(record.offset, record.value, only=calls)
    finally:
        await consumer.stop()


async def partitions_of(admin: AIOKafkaAdminClient, topic: str) -> list[int] | None:
    """The topic's partitions; None while it does not exist. Asked of the metadata of every
    topic the client may see: asking for the topic by name would let a broker that
    auto-creates topics create it, with its own partition count, instead of the relay with
    the family's."""
    described: list[dict[str, Any]] = await admin.describe_topics()
    for entry in described:
        if entry["topic"] == topic and entry["error_code"] == 0 and entry["partitions"]:
            return [p["partition"] for p in entry["partitions"]]
    return None


async def when_it_exists(admin: AIOKafkaAdminClient, topic: str,
                         stop: Callable[[], bool]) -> list[int] | None:
    """Its partitions once it exists (None: stopped first). A broker error while asking is
    asked again: the calls waiting for the topic have no one else to ask for them."""
    while not stop():
        try:
            if (found := await partitions_of(admin, topic)) is not None:
                return found
        except Exception:  # noqa: BLE001 - a broker away, a metadata error: ask again
            pass
        await asyncio.sleep(NEW_TOPIC_POLL_S)
    return None
