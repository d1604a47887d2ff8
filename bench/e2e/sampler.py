"""Once a second, a sample of the whole run for the timeline: proposals published, accepted and
settled, the backlog wherever work waits, CPU and memory per process, statements and commits
PostgreSQL ran, the host's pace (``pace.py``). It also cuts a step short
once its backlog explodes, and notices services that died."""

from __future__ import annotations

import asyncio
import logging
import time

import asyncpg

from bench.e2e.backlog import Backlog, outbox_pending
from bench.e2e.config import Config
from bench.e2e.load import Load
from bench.e2e.meter import Meter
from bench.e2e.pace import Pace
from bench.e2e.proposals import Proposals
from bench.e2e.statements import Statements
from bench.e2e.watch import ServiceWatch

log = logging.getLogger("bench.e2e")

SAMPLE_S = 1.0


class Sampler:
    def __init__(self, config: Config, pool: asyncpg.Pool, backlog: Backlog, meter: Meter,
                 proposals: Proposals, load: Load, watch: ServiceWatch,
                 statements: Statements, pace: Pace, timeline: list[dict]) -> None:
        self.config = config
        self.pool = pool
        self.backlog = backlog
        self.meter = meter
        self.proposals = proposals
        self.load = load
        self.watch = watch
        self.statements = statements
        self.pace = pace
        self.timeline = timeline

    async def sample(self, stopping: asyncio.Event) -> None:
        while not stopping.is_set():
            began = time.monotonic()
            try:
                lag = await self.backlog.lag()
                pending = await outbox_pending(self.pool)
                due = await self.pool.fetchval(
                    "SELECT count(*) FROM dispatcher.calls WHERE next_action_at <= now()")
                executed = await self.statements.counters()
            except Exception as error:  # a slow sample is data too; a failed one is skipped
                log.warning("sample failed: %s", error)
                await asyncio.sleep(SAMPLE_S)
                continue
            backlog = sum(lag.values()) + sum(pending.values()) + due
            self.watch.check_running()
            cpu_s, rss, machine_busy_s = await asyncio.to_thread(self._metered)
            step = self.load.current
            self.timeline.append({
                "t": time.time(), "step": step.index if step else None,
                "published": len(self.proposals), "accepted": self.proposals.accepted,
                "settled": self.proposals.settled,
                "lag": lag, "outbox_pending": pending, "dispatcher_due": due, "backlog": backlog,
                "pg": executed, "cpu_s": cpu_s, "rss": rss, "machine_busy_s": machine_busy_s,
                "pace_ms": self.pace.latest})
            if step is not None and step.index >= 0 and not step.stop.is_set() and \
                    backlog > max(2000, step.rate * self.config.abort_backlog_s):
                step.stop_reason = (f"cut short: backlog {backlog} passed "
                                    f"{self.config.abort_backlog_s:.0f} s of load")
                step.stop.set()
            await asyncio.sleep(max(0.0, SAMPLE_S - (time.monotonic() - began)))

    def _metered(self) -> tuple[dict[str, float], dict[str, int], float]:
        """The meter's readings, taken off the event loop: they read /proc for every process
        (about 10–15 ms a second on two cores with PostgreSQL's backends). On the loop they held
        back every answer that arrived meanwhile, and the publishes due, which the latencies
        measured then counted."""
        return *self.meter.reading(), self.meter.machine_busy()
