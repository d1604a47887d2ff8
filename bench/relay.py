"""Relay benchmark: drain an outbox backlog, against two baselines measured in the same run.

    python -m bench.relay [--rows 100000] [--batch1-rows 5000] [--out bench/results]

Figures (written to relay.json, plotted to relay.png):
- ``events_per_s``: the relay draining ``rows`` pending outbox rows (batches of 1000);
- ``batch1_events_per_s``: the same relay with batch size 1 (baseline: what batching buys);
- ``raw_kafka_events_per_s``: raw aiokafka producing the same records with the same producer
  settings, no database (baseline: the ceiling the relay can approach);
- ``publish_lag_p50_ms`` / ``p99``: created → marked published, at a fixed offered load well
  below saturation, where lag measures the relay's reaction time rather than queueing;
- ``idle_publish_lag_p50_ms`` / ``p99``: the same for single rows written to an otherwise idle
  outbox every ``--idle-interval-ms`` (the NOTIFY wake-up path: commit → NOTIFY → scan →
  claim → produce with ``acks=all`` → mark).
Ratios are reported because absolute numbers depend on a shared, noisy machine.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import time
from pathlib import Path

from services.relay.publisher import new_producer
from services.relay.settings import RelaySettings
from shared import infra
from shared.config import Settings
from shared.db.pool import open_pool
from shared.messaging.envelope import Envelope
from tests.support.kafka import create_topic, unique_topic, wait_for
from tests.support.probe import Probe
from tests.support.relay import running_relay


async def main(rows: int, batch1_rows: int, out: Path, idle_rows: int = 200,
               idle_interval_ms: float = 50.0) -> dict:
    endpoints = await asyncio.to_thread(infra.up, Settings())
    pool = await open_pool(endpoints.database_url, application_name="intentledger-bench", max_size=4)
    try:
        drain = await _drain(pool, endpoints, rows, batch_size=1000)
        batch1 = await _drain(pool, endpoints, batch1_rows, batch_size=1)
        raw = await _raw_kafka(endpoints.kafka_bootstrap, rows)
        lag = await _steady_lag(pool, endpoints, rate_per_s=2000, seconds=10)
        idle = await _idle_lag(pool, endpoints, idle_rows, idle_interval_ms / 1000)
    finally:
        await pool.close()
    result = {
        "cores": os.cpu_count(),
        "rows": rows,
        "events_per_s": drain["events_per_s"],
        "batch1_events_per_s": batch1["events_per_s"],
        "raw_kafka_events_per_s": raw,
        "speedup_vs_batch1": drain["events_per_s"] / batch1["events_per_s"],
        "fraction_of_raw_kafka": drain["events_per_s"] / raw,
        "mean_batch_size": drain["mean_batch_size"],
        "publish_lag_p50_ms": lag["p50"],
        "publish_lag_p99_ms": lag["p99"],
        "steady_offered_per_s": lag["offered_per_s"],
        "idle_publish_lag_p50_ms": idle["p50"],
        "idle_publish_lag_p99_ms": idle["p99"],
        "idle_publish_lag_max_ms": idle["max"],
        "idle_rows": idle_rows,
        "idle_interval_ms": idle_interval_ms,
    }
    out.mkdir(parents=True, exist_ok=True)
    (out / "relay.json").write_text(json.dumps(result, indent=2) + "\n")
    _plot(result, lag["samples"], out / "relay.png")
    return result


async def _fresh_probe(pool, endpoints) -> Probe:
    topic = unique_topic("bench")
    await create_topic(endpoints.kafka_bootstrap, topic, partitions=8)
    return await Probe(pool, topic).create()


async def _drain(pool, endpoints, rows: int, batch_size: int) -> dict:
    probe = await _fresh_probe(pool, endpoints)
    await probe.emit([f"run-{i}" for i in range(200)], per_key=rows // 200, batch=5000)
    started = time.perf_counter()
    async with running_relay(endpoints, probe.schema, batch_size=batch_size) as metrics:
        await wait_for(lambda: _published(probe, rows), timeout=3600, interval=0.05)
        elapsed = time.perf_counter() - started
    return {"events_per_s": rows / elapsed, "mean_batch_size": rows / max(metrics.batches, 1)}


async def _raw_kafka(bootstrap: str, rows: int) -> float:
    topic = unique_topic("bench-raw")
    await create_topic(bootstrap, topic, partitions=8)
    envelopes = [Envelope.new(event_type="ProbeSeen", run_id=f"run-{i % 200}", producer="probe",
                              payload={"item": f"run-{i % 200}", "seq": i}) for i in range(rows)]
    records = [(e.run_id.encode(), e.value(), [(k, v.encode()) for k, v in e.headers().items()])
               for e in envelopes]
    producer = new_producer(bootstrap, RelaySettings().max_message_bytes)
    await producer.start()
    try:
        started = time.perf_counter()
        futures = [await producer.send(topic, value, key=key, headers=headers)
                   for key, value, headers in records]
        await asyncio.gather(*futures)
        return rows / (time.perf_counter() - started)
    finally:
        await producer.stop()


async def _steady_lag(pool, endpoints, rate_per_s: int, seconds: float) -> dict:
    probe = await _fresh_probe(pool, endpoints)
    per_tick = rate_per_s // 100  # 100 ticks a second
    total = 0
    async with running_relay(endpoints, probe.schema) as metrics:
        started = time.perf_counter()
        while time.perf_counter() - started < seconds:
            await probe.emit([f"run-{total % 200}"], per_key=per_tick)
            total += per_tick
            await asyncio.sleep(max(0.0, started + (total / rate_per_s) - time.perf_counter()))
        await wait_for(lambda: _published(probe, total), timeout=120, interval=0.05)
        samples = sorted(metrics.publish_lag_ms)
    offered = total / seconds
    return {"p50": _quantile(samples, 0.50), "p99": _quantile(samples, 0.99),
            "offered_per_s": offered, "samples": samples}


async def _idle_lag(pool, endpoints, rows: int, interval_s: float) -> dict:
    """One row at a time into an idle outbox, each once the previous one is published."""
    probe = await _fresh_probe(pool, endpoints)
    async with running_relay(endpoints, probe.schema) as metrics:
        await asyncio.sleep(1.0)  # the relay's start-up scan is over
        for written in range(1, rows + 1):
            await probe.emit([f"run-{written % 200}"], per_key=1)
            await wait_for(lambda written=written: _published(probe, written), timeout=30, interval=0.005)
            await asyncio.sleep(interval_s)
        samples = sorted(metrics.publish_lag_ms)
    return {"p50": _quantile(samples, 0.50), "p99": _quantile(samples, 0.99),
            "max": samples[-1] if samples else float("nan")}


async def _published(probe: Probe, rows: int) -> bool:
    return await probe.fetchval("SELECT count(*) FROM {s}.outbox WHERE status = 'published'") >= rows


def _quantile(sorted_samples: list[float], q: float) -> float:
    if not sorted_samples:
        return float("nan")
    return statistics.quantiles(sorted_samples, n=100, method="inclusive")[int(q * 100) - 1] \
        if q < 1 else sorted_samples[-1]


def _plot(result: dict, lag_samples: list[float], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (throughput, lag) = plt.subplots(1, 2, figsize=(11, 4))
    names = ["relay\n(batch 1000)", "relay\n(batch 1)", "raw aiokafka send()\n(no database)"]
    values = [result["events_per_s"], result["batch1_events_per_s"], result["raw_kafka_events_per_s"]]
    throughput.bar(names, values, color=["#2b6cb0", "#a0aec0", "#68d391"])
    throughput.set_ylabel("events / s")
    throughput.set_title(f"Outbox drain, {result['rows']:,} rows, {result['cores']} cores")
    for index, value in enumerate(values):
        throughput.annotate(f"{value:,.0f}", (index, value), ha="center", va="bottom")
    lag.hist(lag_samples, bins=50, color="#2b6cb0")
    lag.set_xlabel("publish lag (ms), created → published")
    lag.set_title(f"Steady {result['steady_offered_per_s']:,.0f}/s: "
                  f"p50 {result['publish_lag_p50_ms']:.1f} ms, p99 {result['publish_lag_p99_ms']:.1f} ms")
    figure.tight_layout()
    figure.savefig(path, dpi=110)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--batch1-rows", type=int, default=5_000)
    parser.add_argument("--idle-rows", type=int, default=200)
    parser.add_argument("--idle-interval-ms", type=float, default=50.0)
    parser.add_argument("--out", type=Path, default=Path("bench/results"))
    arguments = parser.parse_args()
    print(json.dumps(asyncio.run(main(arguments.rows, arguments.batch1_rows, arguments.out,
                                      arguments.idle_rows, arguments.idle_interval_ms)), indent=2))
