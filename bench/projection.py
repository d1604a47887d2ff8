"""Projection benchmark: what one ledger event costs the projector by the length of its run,
against the shortest run, measured in the same run.

    python -m bench.projection [--lengths 10,100,1000] [--timed-calls 10] [--out bench/results]

For each length L, a run of L settled calls (the projection tests' own stories,
``tests/support/projection_events.py``: accepted, allowed, intent, attempt, result and the
effect, six events a call) is projected into a scratch projection schema in batches of 500.
Then ``--timed-calls`` more calls of the same run are projected one event per transaction, as the
live consumer applies them at low load, each event timed: wall clock (the projector and its
PostgreSQL statements) and this process's CPU. Figures per length: the median ms per event and
its ratio to the shortest run's. A projector that re-read a run's calls for each event would cost
O(L) per event; one that moves the run by the changed call, O(1).

Attaches to PostgreSQL through ``INTENTLEDGER_DATABASE_URL``, else ``intentledger infra up``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import time
from pathlib import Path

import asyncpg

from services.projection.projector import project
from services.projection.replay import create_scratch, drop_scratch
from shared import infra
from shared.config import Settings
from shared.db.pool import open_pool
from tests.support.projection_events import RunStory

PRELOAD_BATCH = 500


async def main(lengths: list[int], timed_calls: int, out: Path) -> dict:
    endpoints = await asyncio.to_thread(infra.up, Settings())
    pool = await open_pool(endpoints.database_url, application_name="intentledger-bench",
                           max_size=2)
    try:
        runs = {length: await _one_run(pool, length, timed_calls) for length in lengths}
    finally:
        await pool.close()
    shortest = runs[min(lengths)]
    for figures in runs.values():
        figures["wall_vs_shortest"] = figures["wall_ms_per_event"] / shortest["wall_ms_per_event"]
        figures["cpu_vs_shortest"] = figures["cpu_ms_per_event"] / shortest["cpu_ms_per_event"]
    result = {"cores": os.cpu_count(), "timed_calls": timed_calls,
              "runs": {str(length): figures for length, figures in runs.items()}}
    out.mkdir(parents=True, exist_ok=True)
    (out / "projection.json").write_text(json.dumps(result, indent=2) + "\n")
    _plot(result, out / "projection.png")
    return result


async def _one_run(pool: asyncpg.Pool, length: int, timed_calls: int) -> dict:
    story = RunStory()
    for _ in range(length):
        story.tell("succeeded")
    preload = [event.delivery for event in story.events]
    for _ in range(timed_calls):
        story.tell("succeeded")
    timed = [event.delivery for event in story.events[len(preload):]]
    scratch = await create_scratch(pool)
    try:
        for start in range(0, len(preload), PRELOAD_BATCH):
            async with pool.acquire() as conn, conn.transaction():
                await project(conn, scratch, preload[start:start + PRELOAD_BATCH])
        walls, cpus = [], []
        async with pool.acquire() as conn:
            await conn.execute(f'ANALYZE "{scratch}".calls, "{scratch}".events, "{scratch}".runs')
            for delivery in timed:
                wall, cpu = time.perf_counter(), time.process_time()
                async with conn.transaction():
                    await project(conn, scratch, [delivery])
                walls.append((time.perf_counter() - wall) * 1000)
                cpus.append((time.process_time() - cpu) * 1000)
            calls = await conn.fetchval(f'SELECT calls FROM "{scratch}".runs')
    finally:
        await drop_scratch(pool, scratch)
    assert calls == length + timed_calls, f"the run holds {calls} calls"
    return {"calls": length, "events_timed": len(timed),
            "wall_ms_per_event": statistics.median(walls),
            "wall_p90_ms": statistics.quantiles(walls, n=10)[-1],
            "cpu_ms_per_event": statistics.median(cpus)}


def _plot(result: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    lengths = [int(length) for length in result["runs"]]
    figure, axis = plt.subplots(figsize=(7, 3.5))
    for key, label in (("wall_ms_per_event", "wall (projector + PostgreSQL)"),
                       ("cpu_ms_per_event", "projector CPU")):
        axis.plot(lengths, [result["runs"][str(n)][key] for n in lengths], marker="o",
                  label=label)
    axis.set_xscale("log")
    axis.set_ylim(bottom=0)
    axis.set_xlabel("calls in the run")
    axis.set_ylabel("ms per event (median)")
    axis.set_title("One ledger event, projected, by the length of its run")
    axis.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", default="10,100,1000")
    parser.add_argument("--timed-calls", type=int, default=10)
    parser.add_argument("--out", type=Path, default=Path("bench/results"))
    arguments = parser.parse_args()
    print(json.dumps(asyncio.run(main([int(n) for n in arguments.lengths.split(",")],
                                      arguments.timed_calls, arguments.out)), indent=2))
