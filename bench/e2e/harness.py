"""One run of the benchmark, start to end: it owns what the run learns (the proposals, the steps,
the timeline, the problems and warnings) and wires the collaborators that do the work in order."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from bench.e2e import startup, tenancy
from bench.e2e.answers import Answers
from bench.e2e.backlog import Backlog
from bench.e2e.baselines import SKIPPED, run_baselines
from bench.e2e.client_load import ClientLoad
from bench.e2e.config import Config
from bench.e2e.correctness import check_correctness, consumer_totals
from bench.e2e.floor import floor_rates
from bench.e2e.hops import hop_latencies
from bench.e2e.load import Load
from bench.e2e.meter import Meter
from bench.e2e.pace import Pace
from bench.e2e.names import RunNames
from bench.e2e.phases import Phases
from bench.e2e.pipeline import POLICY_FILE
from bench.e2e.profiles import Profiler
from bench.e2e.proposals import Proposals
from bench.e2e.quiet import Quiet
from bench.e2e.result import build_result
from bench.e2e.sampler import Sampler
from bench.e2e.statements import Statements
from bench.e2e.steps import Step
from bench.e2e.transactions import TransactionLog
from bench.e2e.watch import ServiceWatch
from intentledger.chaos.stack import Stack
from shared.db.schemas import migrate_all
from shared.config import Endpoints, Settings
from shared.db.pool import open_pool
from shared.infra import postgres_local


class Bench:
    def __init__(self, config: Config, settings: Settings, endpoints: Endpoints) -> None:
        self.config = config
        self.settings = settings
        self.endpoints = endpoints
        self.names = RunNames(config.wallets, tenancy.tenants(config.tenants))
        self.meter = Meter()
        self.proposals = Proposals()
        self.steps: list[Step] = []
        self.timeline: list[dict[str, Any]] = []
        """One sample a second (``Sampler``)."""
        self.problems: list[str] = []
        """What invalidates the run (it fails whatever the checks say)."""
        self.warnings: list[str] = []
        self.history: dict[str, Any] | None = None
        """What ``--preload`` loaded (``bench.e2e.history``), if asked."""

    async def run(self) -> dict[str, Any]:
        began = time.time()
        await migrate_all(self.settings)
        self.pool = await open_pool(self.endpoints.database_url,
                                    application_name="intentledger-bench", max_size=4)
        self.statements = Statements(self.pool)
        self.stack = Stack(self.endpoints, self.settings.logs_dir, "bench-e2e")
        self.profiler = Profiler(self.config, self.stack)
        self.transactions = TransactionLog(
            self.config, self.pool, postgres_local.log_file(self.settings, self.settings.home))
        watch = ServiceWatch(self.stack, self.problems, self.warnings)
        try:
            started_at = await self.pool.fetchval("SELECT now()")
            durability = await startup.durability(self.pool)
            await startup.seed_wallets(self.pool, self.names.wallet_ids)
            self._warn(await startup.leftovers(self.pool))
            tenants = self.names.tenants
            signers = startup.identities(self.settings, tenants)
            policy = tenancy.write_policy(POLICY_FILE, tenants,
                                         self.settings.home / "bench" / "policy.yaml")
            await startup.start_services(self.stack, self.config, signers, tenants, policy)
            self.meter.add_stack(self.stack, self.settings)
            backlog = Backlog(self.endpoints.kafka_bootstrap)
            await backlog.start()
            quiet = Quiet(self.pool, backlog, self.names, self.proposals, self.config.drain_s)
            self._warn(await quiet.caught_up())
            keys = None if self.config.unsigned else {
                tenant: signers.signing_key(tenancy.principal_of(tenant)) for tenant in tenants}
            load = Load(self.config, self.names, self.proposals, self.endpoints.kafka_bootstrap,
                        keys)
            await load.start()
            client = ClientLoad(load, self.endpoints.kafka_bootstrap, keys)
            await client.start()
            answers = Answers(self.names, self.proposals, self.endpoints.kafka_bootstrap,
                              load.tenant_of)
            await answers.start(backlog)
            await self.statements.start()
            self._warn(self.statements.unavailable_reason)
            pace = Pace()
            await pace.start()
            sampler = Sampler(self.config, self.pool, backlog, self.meter, self.proposals, load,
                              watch, self.statements, pace, self.timeline)
            phases = Phases(self.config, load, quiet, self.profiler, self.transactions,
                            self.proposals, self.steps, self.timeline, self.problems,
                            self.warnings)
            stopping = asyncio.Event()
            background = [asyncio.create_task(sampler.sample(stopping)),
                          asyncio.create_task(answers.collect(stopping))]
            try:
                await phases.warm_up()
                await phases.ramp()
                self.history = await phases.on_history(self.pool, self.names)
                await phases.latency_phase()
                await phases.client_phase(client)
                drained = await quiet.drain()
            finally:
                stopping.set()
                await asyncio.gather(*background, return_exceptions=True)
                await client.stop()
                await load.stop()
                await answers.stop()
                await backlog.stop()
                await pace.stop()
            hops = await hop_latencies(self.pool, self.names, self.proposals)
            correctness = await check_correctness(
                self.pool, self.names, self.proposals, send_errors=load.send_errors,
                drained=drained, drain_s=self.config.drain_s, started_at=started_at)
            cpu_end = self.meter.cpu()
            peaks = self.meter.peak_rss()  # while every process still runs
            self.most_called = await self.statements.most_called(self.proposals.settled)
            self.postgres_time = await self.statements.time_spent(self.proposals.settled)
        finally:
            self._warn(await self.statements.stop())
            await self.stack.stop()
            await self.pool.close()
        correctness["duplicates_prevented"] |= consumer_totals(self.stack)  # logged on stopping
        watch.check_exit_statuses()
        baselines = await run_baselines(
            self.endpoints, quick=self.config.quick,
            sizes={"skeleton": {"rates": floor_rates(self.steps)}}) \
            if self.config.baselines else dict(SKIPPED)
        return build_result(self, began=began, durability=durability, hops=hops,
                            correctness=correctness, baselines=baselines, cpu_end=cpu_end,
                            peaks=peaks)

    def _warn(self, warning: str | None) -> None:
        if warning:
            self.warnings.append(warning)
