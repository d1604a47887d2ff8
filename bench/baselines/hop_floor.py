"""Baseline: what one hop's handoffs cost on this machine when nothing else runs.

At 10 proposals/s every process of the pipeline sleeps between proposals, and a hop is a chain
of handoffs between processes, each to one that was asleep: the service's transaction (its
commit NOTIFYs the relay), the relay's claim (a round trip to a backend that was idle), the
produce (the broker wakes) and the fetch the broker answers (the consumer wakes). On a virtual
machine whose cores halt when idle (``cpuidle_driver``: ``haltpoll`` is KVM's guest driver) the
first round trip after a pause costs several back-to-back ones, so the pipeline's latency at
low load is bounded below by these handoffs, not by its work. Every figure is a median of
``samples``, each taken after ``idle_s`` (0.1 s: the gap between proposals at 10/s) with
nothing running, with the durability the services use:

- ``round_trip_warm_us`` / ``round_trip_after_idle_us``: ``SELECT 1`` back to back, and the
  first one after the pause;
- ``write_to_wake_ms``: a writer's smallest transaction (BEGIN, one row into an outbox made by
  the services' own migrations, COMMIT) from its BEGIN to its NOTIFY reaching a connection
  LISTENing on the relay's channel, as the relay's wake-up does;
- ``produce_to_fetch_ms``: one record sent with ``acks=all`` and idempotence, to a consumer
  waiting in its fetch receiving it;
- ``hop_floor_ms``: one hop's handoffs with no work in them: ``write_to_wake_ms``, then the
  relay's BEGIN (after idle) and claim (warm), then ``produce_to_fetch_ms``.

Fair because it is the best case: the same drivers and settings as the services, one row, no
Python work between the handoffs; a hop of the pipeline at 10/s can approach it, not beat it.
Run it with the stack stopped, as ``bench.e2e`` does: a relay would wake on its NOTIFYs.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import statistics
import time
import uuid
from pathlib import Path

import asyncpg
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from bench.baselines._common import require_durable, scratch_name, scratch_outbox, scratch_topic
from services.relay.main import OUTBOX_CHANNEL
from shared.config import Endpoints
from shared.messaging.kafka_security import client_options

IDLE_S = 0.1
WARM_UP = 5
"""Samples of each kind taken first and dropped: connections, prepared statements, metadata."""
CPUIDLE_DRIVER = Path("/sys/devices/system/cpu/cpuidle/current_driver")


async def run(endpoints: Endpoints, *, samples: int = 100, idle_s: float = IDLE_S) -> dict:
    """Returns the figures above, ``samples``, ``idle_s``, ``cpuidle_driver`` (None where the
    kernel does not say) and ``synchronous_commit``."""
    schema = scratch_name("bench_hop_floor")
    writer = await asyncpg.connect(endpoints.database_url)
    listener = await asyncpg.connect(endpoints.database_url)
    try:
        synchronous_commit = await require_durable(writer)
        await scratch_outbox(writer, schema)
        warm = await _round_trips(writer, samples, idle_s=0.0)
        after_idle = await _round_trips(writer, samples, idle_s=idle_s)
        write_to_wake = await _writes_to_wake(writer, listener, schema, samples, idle_s)
    finally:
        await writer.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        await asyncio.gather(writer.close(), listener.close())
    produce_to_fetch = await _produce_to_fetch(endpoints.kafka_bootstrap, samples, idle_s)
    figures = {
        "round_trip_warm_us": statistics.median(warm) * 1e6,
        "round_trip_after_idle_us": statistics.median(after_idle) * 1e6,
        "write_to_wake_ms": statistics.median(write_to_wake) * 1e3,
        "produce_to_fetch_ms": statistics.median(produce_to_fetch) * 1e3,
    }
    figures["hop_floor_ms"] = (figures["write_to_wake_ms"] + figures["produce_to_fetch_ms"]
                               + (figures["round_trip_after_idle_us"]
                                  + figures["round_trip_warm_us"]) / 1e3)
    return figures | {"samples": samples, "idle_s": idle_s, "cpuidle_driver": _cpuidle_driver(),
                      "synchronous_commit": synchronous_commit}


async def _round_trips(conn: asyncpg.Connection, samples: int, *, idle_s: float) -> list[float]:
    timings = []
    for index in range(WARM_UP + samples):
        if idle_s:
            await asyncio.sleep(idle_s)
        started = time.perf_counter()
        await conn.fetchval("SELECT 1")
        if index >= WARM_UP:
            timings.append(time.perf_counter() - started)
    return timings


async def _writes_to_wake(writer: asyncpg.Connection, listener: asyncpg.Connection, schema: str,
                          samples: int, idle_s: float) -> list[float]:
    woken: asyncio.Queue[float] = asyncio.Queue()

    def notified(_connection, _pid: int, _channel: str, payload: str) -> None:
        if payload == schema:  # the scratch outbox's, not a service's
            woken.put_nowait(time.perf_counter())

    await listener.add_listener(OUTBOX_CHANNEL, notified)
    insert = (f'INSERT INTO "{schema}".outbox (event_id, topic, partition_key, headers, envelope)'
              " VALUES ($1, 'bench.hop-floor', $2, '{}', $3::jsonb)")
    timings = []
    for index in range(WARM_UP + samples):
        await asyncio.sleep(idle_s)
        event_id, run_id = uuid.uuid4(), f"run-{index}"
        envelope = json.dumps({"event_id": str(event_id), "run_id": run_id,
                               "event_type": "ProbeSeen"})
        started = time.perf_counter()
        async with writer.transaction():
            await writer.execute(insert, event_id, run_id, envelope)
        arrived = await asyncio.wait_for(woken.get(), 10)
        if index >= WARM_UP:
            timings.append(arrived - started)
    return timings


async def _produce_to_fetch(bootstrap: str, samples: int, idle_s: float) -> list[float]:
    async with scratch_topic(bootstrap, "hop-floor", partitions=1) as topic:
        partition = TopicPartition(topic, 0)
        consumer = AIOKafkaConsumer(**client_options(bootstrap), enable_auto_commit=False)
        producer = AIOKafkaProducer(**client_options(bootstrap), acks="all",
                                    enable_idempotence=True, client_id="intentledger-bench-hop")
        await asyncio.gather(consumer.start(), producer.start())
        try:
            consumer.assign([partition])
            await consumer.seek_to_end(partition)
            received: asyncio.Queue[float] = asyncio.Queue()

            async def fetching() -> None:
                while True:
                    await consumer.getone()
                    received.put_nowait(time.perf_counter())

            reader = asyncio.create_task(fetching())
            timings = []
            try:
                for index in range(WARM_UP + samples):
                    await asyncio.sleep(idle_s)
                    started = time.perf_counter()
                    await producer.send(topic, b"{}", key=f"run-{index}".encode())
                    arrived = await asyncio.wait_for(received.get(), 10)
                    if index >= WARM_UP:
                        timings.append(arrived - started)
            finally:
                reader.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await reader
        finally:
            await asyncio.gather(consumer.stop(), producer.stop())
    return timings


def _cpuidle_driver() -> str | None:
    with contextlib.suppress(OSError):
        return CPUIDLE_DRIVER.read_text().strip() or None
    return None
