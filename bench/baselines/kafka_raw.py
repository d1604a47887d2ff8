"""Baseline: raw aiokafka, no database, no framework: the Kafka ceiling on this machine.

``records`` envelopes shaped like the services' events (~270-byte JSON value, 7 headers, keyed by
run over 200 runs) are produced to a fresh 8-partition scratch topic with the durability the relay
uses (``acks=all``, idempotence) and its batching (``linger_ms=5``, 1 MB batches), then read back
from the beginning by a plain consumer.

- ``produce_per_s``: one ``send()`` per record, all in flight, then every delivery awaited;
- ``produce_batch_per_s``: the same records as producer batches built per partition with
  ``create_batch``/``send_batch``, as the relay publishes (services/relay/publisher.py);
- ``consume_per_s``: ``getmany`` in a loop until every record arrived (no group, no commits).

Fair because it is the best case for Kafka from Python: same client library, same settings, no
work per record; the pipeline's hops can approach these rates but not exceed them.
"""

from __future__ import annotations

import asyncio
import time

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.partitioner import DefaultPartitioner

from bench.baselines._common import envelope_records, scratch_topic
from shared.config import Endpoints
from shared.messaging.kafka_security import client_options

PARTITIONS = 8
MAX_BATCH_BYTES = 1_000_000


def new_producer(bootstrap: str) -> AIOKafkaProducer:
    return AIOKafkaProducer(**client_options(bootstrap), acks="all", enable_idempotence=True,
                            linger_ms=5, max_batch_size=MAX_BATCH_BYTES,
                            max_request_size=MAX_BATCH_BYTES, client_id="intentledger-bench-raw")


async def run(endpoints: Endpoints, *, records: int = 100_000, partitions: int = PARTITIONS) -> dict:
    """Returns ``produce_per_s``, ``produce_batch_per_s``, ``consume_per_s``, ``records``,
    ``partitions``, ``value_bytes`` (mean)."""
    bootstrap = endpoints.kafka_bootstrap
    payload = envelope_records(records)
    async with scratch_topic(bootstrap, "raw-send", partitions) as send_topic, \
            scratch_topic(bootstrap, "raw-batch", partitions) as batch_topic:
        producer = new_producer(bootstrap)
        await producer.start()
        try:
            await _send_each(producer, send_topic, payload[:1000])  # warm: metadata, connections
            produce = await _send_each(producer, send_topic, payload)
            produce_batch = await _send_batches(producer, batch_topic, payload)
        finally:
            await producer.stop()
        consume = await _consume(bootstrap, send_topic, records + 1000)
    return {
        "produce_per_s": records / produce,
        "produce_batch_per_s": records / produce_batch,
        "consume_per_s": (records + 1000) / consume,
        "records": records,
        "partitions": partitions,
        "value_bytes": sum(len(value) for _, value, _ in payload) / max(len(payload), 1),
    }


async def _send_each(producer: AIOKafkaProducer, topic: str, payload: list) -> float:
    started = time.perf_counter()
    deliveries = [await producer.send(topic, value, key=key, headers=headers)
                  for key, value, headers in payload]
    await asyncio.gather(*deliveries)
    return time.perf_counter() - started


async def _send_batches(producer: AIOKafkaProducer, topic: str, payload: list) -> float:
    partitions = sorted(await producer.partitions_for(topic))
    partitioner = DefaultPartitioner()
    started = time.perf_counter()
    by_partition: dict[int, list] = {}
    for record in payload:
        by_partition.setdefault(partitioner(record[0], partitions, partitions), []).append(record)

    async def one_partition(partition: int, group: list) -> list:
        deliveries, batch = [], producer.create_batch()
        for key, value, headers in group:
            if batch.append(key=key, value=value, timestamp=None, headers=headers) is None:
                deliveries.append(await producer.send_batch(batch, topic, partition=partition))
                batch = producer.create_batch()
                batch.append(key=key, value=value, timestamp=None, headers=headers)
        deliveries.append(await producer.send_batch(batch, topic, partition=partition))
        return deliveries

    per_partition = await asyncio.gather(*(one_partition(p, g) for p, g in by_partition.items()))
    await asyncio.gather(*(delivery for deliveries in per_partition for delivery in deliveries))
    return time.perf_counter() - started


async def _consume(bootstrap: str, topic: str, expected: int, timeout: float = 300.0) -> float:
    consumer = AIOKafkaConsumer(topic, **client_options(bootstrap), group_id=None,
                                auto_offset_reset="earliest", enable_auto_commit=False,
                                fetch_max_bytes=64 * 1024 * 1024)
    await consumer.start()
    try:
        started, seen = time.perf_counter(), 0
        while seen < expected:
            batch = await consumer.getmany(timeout_ms=100, max_records=10_000)
            seen += sum(len(records) for records in batch.values())
            if time.perf_counter() - started > timeout:
                raise RuntimeError(f"consumed {seen} of {expected} records in {timeout:.0f} s")
        elapsed = time.perf_counter() - started
    finally:
        await consumer.stop()
    if seen != expected:
        raise RuntimeError(f"consumed {seen} records, expected {expected}")
    return elapsed
