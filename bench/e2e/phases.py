"""The run's load in order: a warm-up that is not measured, the ramp, step by step, until a
rate is not sustainable; with ``--preload``, a seed copied into a history and the ramp again on
it; then the latency phase the headline p50/p99 come from, then the client phase (the same
measure through the thin client, as an agent sees it).

The ramp goes first because the sustained rate is judged against a quiet stack: a latency
phase beyond the sustainable rate leaves work behind that a drain does not see (calls whose
attempt deadline passed in the queue are reconciled by lookups for seconds, autovacuum follows
the burst), and the ramp's first steps would be measured against it."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

import asyncpg

from bench.e2e.client_load import ClientLoad
from bench.e2e.config import Config
from bench.e2e.history import copy_history, seed_marker
from bench.e2e.load import Load
from bench.e2e.names import RunNames
from bench.e2e.profiles import Profiler
from bench.e2e.proposals import Proposals
from bench.e2e.quiet import Quiet
from bench.e2e.steps import Step, judge
from bench.e2e.transactions import TransactionLog

WARMUP_RATE = 20
WARMUP_SETTLE_S = 60
SEED_RATE = 20
SEED_PROPOSALS = 400
"""The proposals of ``--preload``'s seed, copied into the history (at most ``--preload``)."""


class Phases:
    def __init__(self, config: Config, load: Load, quiet: Quiet, profiler: Profiler,
                 transactions: TransactionLog, proposals: Proposals, steps: list[Step],
                 timeline: list[dict[str, Any]], problems: list[str], warnings: list[str]) -> None:
        self.config = config
        self.load = load
        self.quiet = quiet
        self.profiler = profiler
        self.transactions = transactions
        self.proposals = proposals
        self.steps = steps
        self.timeline = timeline
        self.problems = problems
        self.warnings = warnings

    async def warm_up(self) -> None:
        """A few proposals first (prepared statements, metadata, connections), not measured."""
        if self.config.warmup_s <= 0:
            return
        step = Step(-1, WARMUP_RATE, self.config.warmup_s)
        await self.load.generate(step, self.config.warmup_s)
        deadline = time.monotonic() + WARMUP_SETTLE_S
        while self.proposals.settled < step.last and time.monotonic() < deadline:
            await asyncio.sleep(0.2)
        if self.proposals.settled < step.last:
            self.problems.append(f"warm-up: only {self.proposals.settled} of {step.last} "
                                 f"proposals settled within {WARMUP_SETTLE_S} s; is every "
                                 "service running?")

    async def on_history(self, pool: asyncpg.Pool, names: RunNames) -> dict[str, Any] | None:
        """``--preload N``: a seed of the run's own proposals through the stack, copied into N
        settled proposals of history (``history``), then the ramp again on that ledger."""
        if not self.config.preload:
            return None
        await self._drained("seed")
        since = await seed_marker(pool)
        count = min(self.config.preload, SEED_PROPOSALS)
        seed = Step(len(self.steps), SEED_RATE, count / SEED_RATE, phase="seed")
        self.steps.append(seed)
        await self.load.generate(seed, seed.planned_s)
        await self._after_grace(seed)
        seed.verdict = self._judge(seed)
        await self._drained("history copy")
        loaded = await copy_history(pool, names, since, seed.last - seed.first,
                                    self.config.preload)
        await self.ramp(phase="history")
        return loaded

    async def latency_phase(self) -> None:
        """The headline: ``latency_rate`` offered for ``latency_s`` on its own (judged like a
        step, cut short the same way if its backlog explodes), once the ramp's backlog has
        drained."""
        if self.config.latency_rate:
            await self._fixed_rate("latency", self.config.latency_rate, self.load.generate)

    async def client_phase(self, client: ClientLoad) -> None:
        """``client_rate`` through the thin client for ``latency_s``, once the stack has
        drained: what an agent waiting on ``Client.call`` sees."""
        if self.config.client_rate:
            await self._fixed_rate("client", self.config.client_rate, client.generate)

    async def _fixed_rate(self, phase: str, rate: int,
                          generate: Callable[[Step, float], Awaitable[None]]) -> None:
        await self._drained(phase)
        step = Step(len(self.steps), rate, self.config.latency_s, phase=phase)
        self.steps.append(step)
        await generate(step, step.planned_s)
        await self._after_grace(step)
        step.verdict = self._judge(step)

    async def ramp(self, phase: str = "ramp") -> None:
        """Step by step through ``rates``, each judged while the next runs; stops at the first
        step that is not sustainable."""
        previous: Step | None = None
        for rate in self.config.rates:
            step = Step(len(self.steps), rate, self.config.step_s, phase=phase)
            self.steps.append(step)
            tasks = [asyncio.create_task(self.load.generate(step, step.planned_s))]
            if previous is not None:
                tasks.append(asyncio.create_task(self._judge_later(previous, step)))
            if self.config.profile_rate == rate:
                tasks.append(asyncio.create_task(self.profiler.profile(step)))
            if self.config.transactions_rate == rate:
                tasks.append(asyncio.create_task(self.transactions.record(step)))
            await asyncio.gather(*tasks)
            if step.stop_reason and previous is not None and not previous.verdict["sustainable"]:
                break  # cut short because the previous step was already not sustainable
            previous = step
            if step.stop_reason:  # its backlog exploded: no point going higher
                break
        last = self.steps[-1]
        if last.verdict is None:
            await self._after_grace(last)
            last.verdict = self._judge(last)

    async def _drained(self, phase: str) -> None:
        drained = await self.quiet.drain()
        if not drained["drained"]:
            self.warnings.append(f"the stack had not drained after {drained['seconds']} s "
                                 f"({drained['last_look']}); the {phase} phase starts on its "
                                 "backlog")

    async def _judge_later(self, step: Step, following: Step) -> None:
        """Judge ``step`` ``grace_s`` after it ended (its last proposals had time to settle);
        if it was not sustainable, the following step is cut short."""
        await self._after_grace(step)
        step.verdict = self._judge(step)
        if not step.verdict["sustainable"] and not following.stop.is_set():
            following.stop_reason = f"cut short: the {step.rate}/s step was not sustainable"
            following.stop.set()

    async def _after_grace(self, step: Step) -> None:
        await asyncio.sleep(max(0.0, step.ended + self.config.grace_s - time.time()))

    def _judge(self, step: Step) -> dict[str, Any]:
        return judge(step, self.proposals, self.timeline, self.config)
