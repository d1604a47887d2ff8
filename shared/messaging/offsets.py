"""Offsets of applied batches, committed to Kafka together instead of one request per batch.

A batch's offsets may be committed only after its database transaction has committed; when,
after that, is free. Committing late never loses a record, it only widens what a crash delivers
again, and the inbox applies a delivered-again event once. Committing each batch at once costs
one OffsetCommit round trip on the path to the next fetch and a write to ``__consumer_offsets``
per batch: when batches hold one record, as they do at tens of proposals a second, that was
a quarter to a third of the broker's CPU (29.0 and 25.5 against 20.2 and 19.2 ms per proposal at
10/s, alternated runs of the two versions). So offsets are staged per partition and committed when
the oldest staged one has waited ``COMMIT_INTERVAL_S``, and at once whenever a partition may
change hands: on revocation (a rebalance) and when the subscriber stops.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterable

from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener, ConsumerRecord, TopicPartition
from aiokafka.errors import KafkaError

log = logging.getLogger(__name__)
COMMIT_INTERVAL_S = 0.5
"""The most a crash adds to what is delivered again: half a second of records, each one found in
the inbox and skipped. Kafka's own auto-commit waits ten times as long."""


class CoalescedCommits(ConsumerRebalanceListener):
    """One subscriber's staged offsets (the next offset to read, per partition). ``applied`` is
    called from the handler, ``commit_if_due`` from the poll before each fetch; both run in the
    subscriber's consuming task. The revocation callback runs in aiokafka's coordinator task and
    ``close`` in whichever task stops the subscriber, so a commit holds a lock and takes its
    snapshot inside it: offsets committed later are never older than those committed before."""

    def __init__(self, interval_s: float = COMMIT_INTERVAL_S) -> None:
        self._interval_s = interval_s
        self._staged: dict[TopicPartition, int] = {}
        self._oldest: float | None = None
        self._consumer: AIOKafkaConsumer | None = None
        self._closing = False
        self._lock = asyncio.Lock()

    async def applied(self, consumer: AIOKafkaConsumer, records: Iterable[ConsumerRecord]) -> None:
        """``records`` are applied and their transaction committed. Once the subscriber is
        stopping, the batch is committed at once: nothing will come to commit it later."""
        self._consumer = consumer
        for record in records:
            partition = TopicPartition(record.topic, record.partition)
            self._staged[partition] = max(record.offset + 1, self._staged.get(partition, 0))
        if self._staged and self._oldest is None:
            self._oldest = time.monotonic()
        if self._closing:
            await self.commit()

    def wait_ms(self, idle_ms: int) -> int:
        """How long the next fetch may wait before a staged offset falls due."""
        if self._oldest is None:
            return idle_ms
        due_in = self._oldest + self._interval_s - time.monotonic()
        return max(0, min(idle_ms, round(due_in * 1000)))

    async def commit_if_due(self) -> None:
        if self._oldest is not None and time.monotonic() - self._oldest >= self._interval_s:
            await self.commit()

    async def commit(self, partitions: Iterable[TopicPartition] | None = None) -> None:
        """Commit what is staged (for ``partitions``, if given) and still assigned. A failed
        commit is dropped, not retried: the group has moved on (a rebalance) or the broker is
        away, and in both cases the records are delivered again and found in the inbox."""
        async with self._lock:
            consumer = self._consumer
            chosen = set(self._staged) if partitions is None else set(partitions) & set(self._staged)
            offsets = {partition: self._staged.pop(partition) for partition in chosen}
            if not self._staged:
                self._oldest = None
            if consumer is None or not offsets:
                return
            assigned = consumer.assignment()
            offsets = {partition: offset for partition, offset in offsets.items()
                       if partition in assigned}
            if not offsets:
                return
            try:
                await consumer.commit(offsets)
            except KafkaError as error:
                log.warning("offsets %s not committed (%r); their records will be delivered "
                            "again and skipped by the inbox", offsets, error)

    async def close(self) -> None:
        """The subscriber is stopping: commit what is staged, and from now on every batch."""
        self._closing = True
        await self.commit()

    async def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        await self.commit(revoked)

    async def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        """Nothing to do: positions start from the group's committed offsets."""
