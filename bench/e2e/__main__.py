"""``python -m bench.e2e``: parse the command line, attach to (or start) Kafka and PostgreSQL, run
the benchmark, write the result and the plots, print the summary; exit 1 unless it passed."""

from __future__ import annotations

import asyncio
import logging
import signal
import sys

from bench.e2e import plots, report
from bench.e2e.config import Config, parse_config
from bench.e2e.harness import Bench
from shared import infra
from shared.config import Settings


async def main(config: Config) -> int:
    for chatty in ("aiokafka", "asyncpg"):
        logging.getLogger(chatty).setLevel(logging.CRITICAL)
    settings = Settings()
    endpoints = await asyncio.to_thread(infra.attach, settings)
    bench = Bench(config, settings, endpoints)
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    for sig in (signal.SIGINT, signal.SIGTERM):  # stop the services on Ctrl-C too
        loop.add_signal_handler(sig, task.cancel)
    result = await bench.run()
    report.write_json(result, bench.timeline, config.out)
    written = plots.plot_all(result, bench, config.out)
    report.print_summary(result, config.out, written)
    return 0 if result["passed"] else 1


if __name__ == "__main__":
    if any(arg == "--compare" or arg.startswith("--compare=") for arg in sys.argv[1:]):
        from bench.e2e import compare

        sys.exit(compare.main(sys.argv[1:]))
    sys.exit(asyncio.run(main(parse_config())))
