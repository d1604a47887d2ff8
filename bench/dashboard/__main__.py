"""``python -m bench.dashboard``: a short benchmark run of the whole stack, scraped every 2 s by a
real Prometheus (Debian's ``prometheus``), then the Grafana dashboard drawn from what it
scraped (``render.py``) into ``docs/dashboard.png``, with ``bench/results/dashboard.json``
saying which series each panel holds. Needs the local infrastructure (``intentledger infra
up``); the benchmark itself is ``bench.e2e`` with every service's ``/metrics`` on a port.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path


from bench.dashboard.render import draw, query_panels, summary
from bench.e2e.pipeline import SERVICES
from shared.infra.ports import free_port
from shared.infra.readiness import http_answers, wait_until

ROOT = Path(__file__).resolve().parents[2]
SCRAPE_S = 2.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.dashboard", description=__doc__)
    parser.add_argument("--rates", default="10,25,50", help="the benchmark's offered rates")
    parser.add_argument("--step-seconds", type=float, default=30.0)
    parser.add_argument("--wallet-faults", default="wallet.after_commit_drop_response=drop@300",
                        help="fault rules for the wallet: by default its 300th answer is lost, "
                             "so the UNKNOWN panels show one call reconciled")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "dashboard.png")
    parser.add_argument("--summary", type=Path,
                        default=ROOT / "bench" / "results" / "dashboard.json")
    args = parser.parse_args(argv)
    ports = {service: free_port() for service in SERVICES}
    with tempfile.TemporaryDirectory(prefix="intentledger-dashboard-") as folder:
        work = Path(folder)
        prometheus_port = free_port()
        with _prometheus(work, ports, prometheus_port):
            start = datetime.now(UTC)
            _benchmark(args, ports, work)
            time.sleep(3 * SCRAPE_S)  # the last samples
            end = datetime.now(UTC)
            panels = asyncio.run(query_panels(f"http://127.0.0.1:{prometheus_port}", start, end,
                                              SCRAPE_S))
    draw(panels, args.out, f"intentledger pipeline — {args.rates} proposals/s, "
                           f"{int((end - start).total_seconds())} s, scraped every {SCRAPE_S:g} s")
    args.summary.write_text(json.dumps({"started": start.isoformat(), "ended": end.isoformat(),
                                        "rates": args.rates, "wallet_faults": args.wallet_faults,
                                        "panels": summary(panels)}, indent=2) + "\n")
    print(f"wrote {args.out} and {args.summary}")
    return 0


class _prometheus:
    """A Prometheus scraping every service's ``/metrics`` while inside."""

    def __init__(self, work: Path, ports: dict[str, int], port: int) -> None:
        self._work, self._ports, self._port = work, ports, port

    def __enter__(self) -> None:
        config = self._work / "prometheus.yml"
        jobs = [{"job_name": service, "static_configs": [{"targets": [f"127.0.0.1:{port}"]}]}
                for service, port in self._ports.items()]
        config.write_text(json.dumps({"global": {"scrape_interval": f"{SCRAPE_S:g}s"},
                                      "scrape_configs": jobs}))
        self._process = subprocess.Popen(
            ["prometheus", f"--config.file={config}", f"--storage.tsdb.path={self._work / 'tsdb'}",
             f"--web.listen-address=127.0.0.1:{self._port}", "--log.level=warn"],
            stdout=subprocess.DEVNULL, stderr=(self._work / "prometheus.log").open("w"))
        asyncio.run(wait_until(lambda: http_answers(f"http://127.0.0.1:{self._port}/-/ready"),
                               "prometheus", 30.0, alive=lambda: self._process.poll() is None,
                               log_hint=f"; see {self._work / 'prometheus.log'}"))

    def __exit__(self, *_: object) -> None:
        self._process.terminate()
        self._process.wait(timeout=30)


def _benchmark(args: argparse.Namespace, ports: dict[str, int], work: Path) -> None:
    settings = [f"--env={service}:INTENTLEDGER_HEALTH_PORT={port}"
                for service, port in ports.items()]
    if args.wallet_faults:
        settings.append(f"--env=wallet:INTENTLEDGER_WALLET_FAULTS={args.wallet_faults}")
    subprocess.run([sys.executable, "-m", "bench.e2e", "--quick", "--no-baselines",
                    "--rates", args.rates, "--step-seconds", str(args.step_seconds),
                    "--out", str(work / "bench"), *settings], check=True, cwd=ROOT)


if __name__ == "__main__":
    sys.exit(main())
