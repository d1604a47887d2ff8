"""Baseline: what FastStream costs over a raw aiokafka loop, with the same trivial handler.

A fresh 8-partition topic is pre-filled with ``records`` envelopes (as the services' events). Then
the same handler (``json.loads`` each record's value, count it) consumes all of them, from the
beginning, under a new consumer group each time:

- ``faststream``: the project's own subscription path (shared/messaging/subscription.py
  ``subscribe``: batch subscriber, ``max_records=500``, offsets staged after each batch and
  committed together (``CoalescedCommits``), nack on failure, the UTF-8-safe header parser, lag
  recording), with the handler in place of an ``IdempotentConsumer``;
- ``raw``: ``AIOKafkaConsumer.getmany(max_records=500)`` in a loop, the handler, then the same
  ``CoalescedCommits``: the same delivery semantics and commit policy, no framework.

Each is timed from its first record handled to its last (group join and partition assignment,
identical fixed costs, are left out), ``rounds`` times alternately; the best round counts. Fair
because only the framework differs: same client library, batch size, commit policy and handler.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid

from aiokafka import AIOKafkaConsumer

from bench.baselines._common import envelope_records, scratch_topic
from bench.baselines.kafka_raw import new_producer
from shared.config import Endpoints
from shared.messaging.kafka_security import client_options, new_broker
from shared.messaging.offsets import CoalescedCommits
from shared.messaging.subscription import IDLE_WAIT_MS, subscribe

MAX_RECORDS = 500


async def run(endpoints: Endpoints, *, records: int = 100_000, rounds: int = 2,
              partitions: int = 8, timeout: float = 300.0) -> dict:
    """Returns ``faststream_per_s``, ``raw_per_s`` (best rounds), ``ratio`` (faststream / raw),
    ``faststream_rounds_per_s``, ``raw_rounds_per_s``, ``records``, ``max_records``."""
    bootstrap = endpoints.kafka_bootstrap
    async with scratch_topic(bootstrap, "fs-vs-raw", partitions) as topic:
        await _fill(bootstrap, topic, records)
        faststream_rates, raw_rates = [], []
        for _ in range(rounds):
            raw_rates.append(await asyncio.wait_for(_raw(bootstrap, topic, records), timeout))
            faststream_rates.append(await asyncio.wait_for(_faststream(bootstrap, topic, records), timeout))
    return {
        "faststream_per_s": max(faststream_rates),
        "raw_per_s": max(raw_rates),
        "ratio": max(faststream_rates) / max(raw_rates),
        "faststream_rounds_per_s": faststream_rates,
        "raw_rounds_per_s": raw_rates,
        "records": records,
        "max_records": MAX_RECORDS,
    }


class _Counter:
    """The handler, shaped as what ``subscribe`` calls: ``name`` and ``process(records)``."""

    name = "bench-count"

    def __init__(self, expected: int) -> None:
        self.expected, self.count = expected, 0
        self.first: float | None = None
        self.last: float | None = None
        self.done = asyncio.Event()

    async def process(self, records) -> None:
        if self.first is None:
            self.first = time.perf_counter()
        for record in records:
            json.loads(record.value)
            self.count += 1
        if self.count >= self.expected and not self.done.is_set():
            self.last = time.perf_counter()
            self.done.set()

    def rate(self) -> float:
        if self.count != self.expected:
            raise RuntimeError(f"handled {self.count} records, expected {self.expected}")
        return self.count / (self.last - self.first)


async def _fill(bootstrap: str, topic: str, records: int) -> None:
    producer = new_producer(bootstrap)
    await producer.start()
    try:
        deliveries = [await producer.send(topic, value, key=key, headers=headers)
                      for key, value, headers in envelope_records(records)]
        await asyncio.gather(*deliveries)
    finally:
        await producer.stop()


async def _faststream(bootstrap: str, topic: str, records: int) -> float:
    counter = _Counter(records)
    broker = new_broker(bootstrap, logger=None)
    subscribe(broker, counter, topic, group_id=f"bench-fs-{uuid.uuid4().hex[:8]}",  # type: ignore[arg-type]
              max_records=MAX_RECORDS)
    await broker.start()
    try:
        await counter.done.wait()
    finally:
        await broker.stop()
    return counter.rate()


async def _raw(bootstrap: str, topic: str, records: int) -> float:
    counter, commits = _Counter(records), CoalescedCommits()
    consumer = AIOKafkaConsumer(**client_options(bootstrap),
                                group_id=f"bench-raw-{uuid.uuid4().hex[:8]}",
                                auto_offset_reset="earliest", enable_auto_commit=False)
    consumer.subscribe([topic], listener=commits)
    await consumer.start()
    try:
        while not counter.done.is_set():
            await commits.commit_if_due()
            batch = await consumer.getmany(timeout_ms=commits.wait_ms(IDLE_WAIT_MS),
                                           max_records=MAX_RECORDS)
            if batch:
                handled = [record for part in batch.values() for record in part]
                await counter.process(handled)
                await commits.applied(consumer, handled)
    finally:
        await commits.close()
        await consumer.stop()
    return counter.rate()
