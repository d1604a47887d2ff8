"""Run one baseline alone and print its figures as JSON.

    python -m bench.baselines pgbench [--seconds 10] [--clients 16] [--batch-rows 100]
    python -m bench.baselines kafka_raw [--records 100000]
    python -m bench.baselines faststream_vs_raw [--records 100000] [--rounds 2]
    python -m bench.baselines dbos_peer [--seconds 10] [--concurrency 32] [--latency-workflows 200]
        [--mode direct|queue] [--steps transaction|step]
    python -m bench.baselines hop_floor [--samples 100] [--idle-s 0.1]
    python -m bench.baselines skeleton [--rates 10,50,100,150,200] [--step-s 20] [--runs 256]

Infrastructure comes from ``intentledger infra up`` (or the INTENTLEDGER_KAFKA_BOOTSTRAP /
INTENTLEDGER_DATABASE_URL endpoints it attaches to).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sys
import time

from bench.baselines import NAMES, baseline
from shared import infra
from shared.config import Settings

OPTIONS = {
    "pgbench": {"seconds": float, "clients": int, "batch_rows": int},
    "kafka_raw": {"records": int},
    "faststream_vs_raw": {"records": int, "rounds": int},
    "dbos_peer": {"seconds": float, "concurrency": int, "latency_workflows": int, "mode": str,
                  "steps": str, "wallets": int},
    "hop_floor": {"samples": int, "idle_s": float},
    "skeleton": {"rates": str, "step_s": float, "runs": int},
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("name", choices=NAMES)
    for option, kind in {k: v for options in OPTIONS.values() for k, v in options.items()}.items():
        parser.add_argument(f"--{option.replace('_', '-')}", type=kind)
    arguments = parser.parse_args()
    sizes = {option: getattr(arguments, option) for option in OPTIONS[arguments.name]
             if getattr(arguments, option) is not None}
    with contextlib.redirect_stdout(sys.stderr):  # stdout carries only the JSON figures
        endpoints = infra.up(Settings())
    load_before = os.getloadavg()
    started = time.perf_counter()
    figures = asyncio.run(baseline(arguments.name)(endpoints, **sizes))
    print(json.dumps({"baseline": arguments.name, **figures, "wall_s": time.perf_counter() - started,
                      "cores": os.cpu_count(), "loadavg_before": load_before,
                      "loadavg_after": os.getloadavg()}, indent=2))


if __name__ == "__main__":
    main()
