"""Waiting for a quiet pipeline: caught up before the load starts (nothing left over from
earlier runs), drained after it (every proposal settled, nothing waiting anywhere)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import asyncpg

from bench.e2e.backlog import Backlog, outbox_pending
from bench.e2e.names import RunNames
from bench.e2e.pipeline import MOVING
from bench.e2e.proposals import Proposals


class Quiet:
    def __init__(self, pool: asyncpg.Pool, backlog: Backlog, names: RunNames,
                 proposals: Proposals, drain_s: float) -> None:
        self.pool = pool
        self.backlog = backlog
        self.names = names
        self.proposals = proposals
        self.drain_s = drain_s

    async def caught_up(self, limit_s: float = 120.0) -> str | None:
        """Every group at the end of its topics and the outboxes empty; else, after
        ``limit_s``, a warning saying what was still waiting."""
        deadline = time.monotonic() + limit_s
        while True:
            lag = await self.backlog.lag()
            pending = await outbox_pending(self.pool)
            if not any(lag.values()) and not any(pending.values()):
                return None
            if time.monotonic() > deadline:
                return f"the pipeline was not quiet at the start: lag {lag}, outbox {pending}"
            await asyncio.sleep(0.5)

    async def drain(self) -> dict[str, Any]:
        """Until every proposal is settled and the pipeline is quiet (twice in a row), or
        ``drain_s``."""
        began = time.monotonic()
        previous_quiet = False
        look: dict[str, Any] = {}
        while True:
            published = len(self.proposals)
            moving = await self.pool.fetchval(
                "SELECT count(*) FROM dispatcher.calls WHERE run_id LIKE $1 "
                "AND state = ANY($2::text[])", self.names.runs_like, list(MOVING))
            lag = await self.backlog.lag()
            pending = await outbox_pending(self.pool)
            settled = self.proposals.settled
            look = {"published": published, "settled": settled, "moving_calls": moving,
                    "lag": lag, "outbox_pending": pending}
            quiet = (settled >= published and not moving and not any(lag.values())
                     and not any(pending.values()))
            if quiet and previous_quiet:
                return {"drained": True, "seconds": round(time.monotonic() - began, 1),
                        "last_look": look}
            previous_quiet = quiet
            if time.monotonic() - began > self.drain_s:
                return {"drained": False, "seconds": round(time.monotonic() - began, 1),
                        "last_look": look}
            await asyncio.sleep(0.5)
