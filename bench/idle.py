"""Idle benchmark: what the stack costs with nothing to do, the floor a platform team pays for
every deployment whether agents use it or not.

    python -m bench.idle [--settle-seconds 30] [--seconds 60] [--out bench/results]

First the baseline: Kafka and PostgreSQL alone, over ``--seconds``. Then every service is
started as the end-to-end benchmark starts it (its settings, one replica each), given
``--settle-seconds`` for start-up work (topic creation, migrations, first polls and sweeps),
and measured over ``--seconds`` again. Figures are cores: CPU seconds per second of wall clock,
per process and for the whole machine; ``services_add`` is the machine's busy time with the
services less the baseline's. Pollers, health samplers and fetches held by the broker
(``fetch.max.wait.ms``) show up here, not under load.

Attaches to Kafka and PostgreSQL through ``INTENTLEDGER_KAFKA_BOOTSTRAP`` and
``INTENTLEDGER_DATABASE_URL``, else ``intentledger infra up``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from pathlib import Path

from bench.e2e import startup
from bench.e2e.config import parse_config
from bench.e2e.meter import Meter
from intentledger.chaos.stack import Stack
from shared import infra
from shared.config import Settings
from shared.db.schemas import migrate_all

ROOT = Path(__file__).resolve().parents[1]


async def main(settle_s: float, seconds: float, out: Path) -> dict:
    settings = Settings()
    endpoints = await asyncio.to_thread(infra.attach, settings)
    await migrate_all(settings)
    stack = Stack(endpoints, settings.logs_dir, "bench-idle")
    infrastructure = Meter()
    infrastructure.add_stack(stack, settings)  # no service started yet: Kafka and PostgreSQL
    baseline = await _cores(infrastructure, seconds)
    try:
        await startup.start_services(stack, parse_config([]), startup.identities(settings))
        await asyncio.sleep(settle_s)
        everything = Meter()
        everything.add_stack(stack, settings)
        measured = await _cores(everything, seconds)
    finally:
        await stack.stop()
    result = {"benchmark": "idle", "seconds": seconds, "settle_seconds": settle_s,
              "baseline": baseline, "stack": measured,
              "services_add": round(measured["machine"] - baseline["machine"], 4)}
    out.mkdir(parents=True, exist_ok=True)
    (out / "idle.json").write_text(json.dumps(result, indent=2) + "\n")
    return result


async def _cores(meter: Meter, seconds: float) -> dict[str, float]:
    """Each process's cores over ``seconds`` (this process, the harness, left out) and the
    whole machine's."""
    before, machine_before, started = meter.cpu(), meter.machine_busy(), time.monotonic()
    await asyncio.sleep(seconds)
    after, machine_after = meter.cpu(), meter.machine_busy()
    elapsed = time.monotonic() - started
    cores = {name: round((after[name] - before.get(name, 0.0)) / elapsed, 4)
             for name in after if name != "harness"}
    return cores | {"machine": round((machine_after - machine_before) / elapsed, 4)}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--settle-seconds", type=float, default=30.0)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    arguments = parser.parse_args()
    print(json.dumps(asyncio.run(main(arguments.settle_seconds, arguments.seconds,
                                      arguments.out)), indent=2))
