"""End-to-end benchmark: agents' proposals through every service to their settled result.

    python -m bench.e2e                      # 100/s for 60 s, the ramp (60 s steps), baselines
    python -m bench.e2e --quick              # a smoke: 100/s, then 25, 50, 100, 200/s, 10 s each
    python -m bench.e2e --rates 100,400 --step-seconds 30 --replicas dispatcher=2

What runs: Kafka and PostgreSQL (attached when ``INTENTLEDGER_KAFKA_BOOTSTRAP`` and
``INTENTLEDGER_DATABASE_URL`` are set, else ``intentledger infra up``), full durability as
configured there; the relay, proposal-intake, policy, dispatcher, projection and the reference
wallet as real processes (``services.chaos.stack.Stack``), under ``bench/policy.yaml`` and
``config/tools.example.yaml``.

The load is open-loop: raw proposals (the generic envelope and OpenAI chat, alternating; each
its own operation key; runs of ``--calls-per-run`` calls spread over ``--active-runs`` runs at
a time and over ``--wallets`` wallets) are published to ``agent.proposals`` on a fixed schedule,
never waiting for answers. First a latency phase offers ``--latency-rate`` (100/s, where the
issue states its p50/p99 targets) for one step and lets the stack drain; then the rate ramps up
from ``--rates`` step by step. A step is *sustainable* when, for its
whole length, the end-to-end p99 (proposals published in its second half, unanswered ones
counting as infinitely late) stays within ``--max-p99-ms`` and the backlog at its end (consumer
lag of every group + pending outbox rows + calls due at the dispatcher) is at most
``--max-backlog-s`` seconds of the offered rate. The ramp stops at the first step that is not
sustainable (cut short as soon as its backlog passes ``--abort-backlog-s`` seconds of load);
``sustained_proposals_per_s`` is the highest sustainable rate.

Latency per call is measured from the proposal's publish to its ``ToolCallSettled`` on
``agent.results`` (the headline) and to the intake's ``ProposalAccepted``, matched by call id;
per-hop latency comes from the event timestamps of the projection's history, the wallet's debit
rows and the settled announcement. CPU seconds and peak RSS are measured per process (each
service, Kafka's JVM, PostgreSQL's postmaster with every backend), with the harness itself and
the machine's total reported beside them.

After the ramp the stack drains, and correctness is checked from the records that own each
fact: every proposal was accepted once and reached exactly one terminal state (dispatcher and
projection agree), every succeeded call has exactly one wallet debit per operation key and
nothing else has one, every wallet's balance equals its opening balance minus its debits,
nothing was dead-lettered or parked, and the agent was told. A lost or duplicated effect marks
the run FAILED (``"passed": false`` in the JSON, exit status 1), whatever its speed.

Writes ``bench/results/e2e.json`` and the plots ``e2e-timeline.png`` (throughput, latency and
backlog over time), ``e2e-latency-cdf.png`` (at 100/s, and every step) and ``e2e-cpu.png``
(CPU and memory per process).
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import json
import logging
import math
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import psutil
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient

from services.chaos.stack import Stack
from services.registry import migrate_all
from services.wallet.repository import open_wallet
from shared import infra
from shared.config import Endpoints, Settings
from shared.contracts.intake import DUPLICATE_PROPOSAL, PROPOSAL_ACCEPTED, PROPOSAL_REJECTED
from shared.contracts.results import TOOL_CALL_SETTLED
from shared.db.pool import open_pool
from shared.infra import postgres_local
from shared.infra.state import InfraState
from shared.messaging.kafka_security import client_options
from shared.messaging.topics import (AGENT_PROPOSALS, AGENT_RESULTS, LEDGER_APPROVALS,
                                     LEDGER_AUTHORIZATIONS, LEDGER_DISPATCH, LEDGER_EFFECTS,
                                     LEDGER_INTAKE, LEDGER_RESOLUTIONS)

log = logging.getLogger("bench.e2e")

ROOT = Path(__file__).resolve().parents[1]
POLICY_FILE = ROOT / "bench" / "policy.yaml"
TOOLS_FILE = ROOT / "config" / "tools.example.yaml"

SERVICES = ("relay", "proposal-intake", "policy", "dispatcher", "projection", "wallet")
GROUP_TOPICS = {
    "proposal-intake": (AGENT_PROPOSALS,),
    "policy": (LEDGER_INTAKE, LEDGER_APPROVALS),
    "dispatcher": (LEDGER_AUTHORIZATIONS, "effects.receipts", LEDGER_RESOLUTIONS),
    "wallet": ("effects.wallet",),
    "projection": (LEDGER_INTAKE, LEDGER_AUTHORIZATIONS, LEDGER_DISPATCH, LEDGER_EFFECTS),
}
"""Every consumer group the pipeline has, with the topics it applies."""
OUTBOX_SCHEMAS = ("proposal_intake", "policy", "dispatcher", "wallet", "projection")
MOVING = ("AUTHORIZED", "INTENT_RECORDED", "DISPATCHING", "UNKNOWN", "RECONCILING",
          "COMPENSATING")
EXPECTED_DEBITS = {"SUCCEEDED": 1, "COMPENSATED": 1, "COMPENSATION_FAILED": 1, "FAILED": 0,
                   "DENIED": 0, "EXPIRED": 0}
"""Wallet debits a debit call may have in each terminal state (a compensated one keeps its debit
and has one refund)."""
TERMINAL = frozenset(EXPECTED_DEBITS)
FULL_RATES = (10, 25, 50, 100, 200, 400, 800, 1600, 2400, 3200)
QUICK_RATES = (25, 50, 100, 200)
HEADLINE_RATE = 100
"""The offered rate of the latency phase (the issue's p50/p99 targets are stated at 100/s)."""
OPENING_BALANCE_MINOR = 10**13
AMOUNT, AMOUNT_MINOR = "1.00", 100
TICK_S = 0.005
SAMPLE_S = 1.0
OTHER_LOAD_WARNING_CORES = 0.15
"""Above this much CPU used by processes that are not the benchmark's, a step is flagged."""
PSS_EVERY = 5
"""PostgreSQL's memory is summed as PSS (shared buffers counted once), read every 5th sample."""


@dataclass
class Config:
    rates: list[int]
    step_s: float
    grace_s: float
    drain_s: float
    warmup_s: float
    calls_per_run: int
    active_runs: int
    wallets: int
    formats: list[str]
    max_p99_ms: float
    max_backlog_s: float
    abort_backlog_s: float
    replicas: dict[str, int]
    env: dict[str, dict[str, str]]
    out: Path
    profile_rate: int | None
    profile_s: float
    baselines: bool
    quick: bool
    latency_rate: int = HEADLINE_RATE
    latency_s: float = 60.0


@dataclass
class Step:
    index: int
    rate: int
    planned_s: float
    started: float = 0.0
    """Wall clock (epoch seconds), comparable with PostgreSQL's timestamps on this host."""
    ended: float = 0.0
    first: int = 0
    """Index of the step's first proposal; ``last`` is one past its last."""
    last: int = 0
    stop: asyncio.Event = field(default_factory=asyncio.Event)
    stop_reason: str | None = None
    generator_lag_ms: list[float] = field(default_factory=list)
    verdict: dict[str, Any] | None = None
    profiled: bool = False
    phase: str = "ramp"
    """``latency``: the fixed-rate phase the headline p50/p99 come from; ``ramp``: a step of the
    search for the sustainable maximum."""
    drained_after_s: float | None = None


# -- processes: CPU seconds and memory ---------------------------------------------------------


class Meter:
    """Cumulative CPU seconds and memory of every process under test (psutil)."""

    def __init__(self) -> None:
        self.processes: dict[str, psutil.Process] = {}
        self.kinds: dict[str, str] = {}
        self.notes: dict[str, str] = {}
        self._pss: dict[str, int] = {}
        self._samples = 0
        self._machine0 = psutil.cpu_times()

    def add(self, name: str, pid: int | None, kind: str, note: str | None = None) -> None:
        if pid is None:
            self.notes[name] = note or "not measured"
            return
        try:
            self.processes[name] = psutil.Process(pid)
            self.kinds[name] = kind
        except psutil.NoSuchProcess:
            self.notes[name] = f"pid {pid} is not running"

    def cpu(self) -> dict[str, float]:
        """Seconds of CPU (user + system) each process has used since it started; PostgreSQL's
        includes every backend, live (their own times) or ended (reaped into the postmaster's
        children times)."""
        used: dict[str, float] = {}
        for name, process in self.processes.items():
            try:
                times = process.cpu_times()
                total = times.user + times.system
                if self.kinds[name] == "postgres":
                    total += times.children_user + times.children_system
                    for child in process.children():
                        try:
                            child_times = child.cpu_times()
                            total += child_times.user + child_times.system
                        except psutil.Error:
                            pass
                used[name] = total
            except psutil.Error:
                continue
        return used

    def memory(self) -> dict[str, int]:
        """Resident bytes now; PostgreSQL's as the PSS of the postmaster and its backends."""
        self._samples += 1
        resident: dict[str, int] = {}
        for name, process in self.processes.items():
            try:
                if self.kinds[name] == "postgres":
                    if self._samples % PSS_EVERY == 1 or name not in self._pss:
                        self._pss[name] = _pss_tree(process)
                    resident[name] = self._pss[name]
                else:
                    resident[name] = process.memory_info().rss
            except psutil.Error:
                continue
        return resident

    def peak_rss(self) -> dict[str, int | None]:
        """The kernel's high-water mark (VmHWM) of each single process; None for PostgreSQL,
        whose many processes share memory (its peak is the largest sampled PSS sum)."""
        peaks: dict[str, int | None] = {}
        for name, process in self.processes.items():
            if self.kinds[name] == "postgres":
                peaks[name] = None
                continue
            try:
                status = Path(f"/proc/{process.pid}/status").read_text()
                found = re.search(r"^VmHWM:\s+(\d+) kB", status, re.MULTILINE)
                peaks[name] = int(found.group(1)) * 1024 if found else None
            except OSError:
                peaks[name] = None
        return peaks

    def machine_busy(self) -> float:
        """CPU seconds the whole machine spent busy (every core, every process) since start."""
        def busy(times) -> float:
            return sum(getattr(times, name, 0.0) for name in ("user", "nice", "system", "irq",
                                                               "softirq", "steal"))
        return busy(psutil.cpu_times()) - busy(self._machine0)


def _pss_tree(root: psutil.Process) -> int:
    total = 0
    for process in [root, *root.children()]:
        try:
            total += process.memory_full_info().pss
        except psutil.Error:
            pass
    return total


def infrastructure_pids(settings: Settings) -> dict[str, tuple[int | None, str | None]]:
    """Kafka's and PostgreSQL's pids when ``infra up`` started them as local processes (the
    state in ``$INTENTLEDGER_HOME/infra.json``); else None and why."""
    home = settings.home.resolve()
    state = InfraState.load(settings.infra_state_file)
    found: dict[str, tuple[int | None, str | None]] = {}
    kafka_pid = state.kafka.pid if state.kafka.mode == "local" else None
    if kafka_pid and psutil.pid_exists(kafka_pid):
        found["kafka"] = (kafka_pid, None)
    else:
        found["kafka"] = (None, f"Kafka is not a local process of {home} (mode "
                                f"{state.kafka.mode}): its CPU is not measured")
    serving = postgres_local.running(home) if state.postgres.mode == "local" else None
    if serving:
        found["postgres"] = (serving[0], None)
    else:
        found["postgres"] = (None, f"PostgreSQL is not a local process of {home} (mode "
                                   f"{state.postgres.mode}): its CPU is not measured")
    return found


# -- Kafka positions: the backlog of every consumer group --------------------------------------


class Backlog:
    """Consumer lag per group (end offset minus committed offset, over the topics it applies),
    read through one admin client and one paused consumer that never fetches records."""

    def __init__(self, bootstrap: str) -> None:
        self._bootstrap = bootstrap

    async def start(self) -> None:
        self._admin = AIOKafkaAdminClient(**client_options(self._bootstrap))
        await self._admin.start()
        topics = sorted({topic for topics in GROUP_TOPICS.values() for topic in topics})
        described = await self._admin.describe_topics(topics)
        self._partitions = [TopicPartition(t["topic"], p["partition"]) for t in described
                            for p in t["partitions"] if not t.get("error_code")]
        self._consumer = AIOKafkaConsumer(**client_options(self._bootstrap), group_id=None,
                                          enable_auto_commit=False)
        await self._consumer.start()
        self._consumer.assign(self._partitions)
        self._consumer.pause(*self._partitions)  # positions only: never fetch a record
        self._first = await self._consumer.beginning_offsets(self._partitions)

    async def stop(self) -> None:
        await self._consumer.stop()
        await self._admin.close()

    async def partitions(self, topic: str) -> list[TopicPartition]:
        [described] = await self._admin.describe_topics([topic])
        return [TopicPartition(topic, p["partition"]) for p in described["partitions"]]

    async def lag(self) -> dict[str, int]:
        ends = await self._consumer.end_offsets(self._partitions)
        committed = await asyncio.gather(*(self._admin.list_consumer_group_offsets(group)
                                           for group in GROUP_TOPICS))
        lags = {}
        for (group, topics), offsets in zip(GROUP_TOPICS.items(), committed):
            behind = 0
            for tp, end in ends.items():
                if tp.topic not in topics:
                    continue
                at = offsets[tp].offset if tp in offsets and offsets[tp].offset >= 0 \
                    else self._first.get(tp, 0)
                behind += max(end - at, 0)
            lags[group] = behind
        return lags


# -- the benchmark ---------------------------------------------------------------------------


class Bench:
    def __init__(self, config: Config, settings: Settings, endpoints: Endpoints) -> None:
        self.config = config
        self.settings = settings
        self.endpoints = endpoints
        self.nonce = f"{time.strftime('%m%d%H%M')}{secrets.token_hex(2)}"
        self.prefix = f"bench-{self.nonce}"
        self.wallet_ids = [f"tenant/acme/{self.prefix}-w{j}" for j in range(config.wallets)]
        self.meter = Meter()
        self.steps: list[Step] = []
        self.timeline: list[dict[str, Any]] = []
        self.problems: list[str] = []
        self.warnings: list[str] = []
        # per proposal, by index
        self.t_pub: list[float] = []
        self.step_of: list[int] = []
        self.formats: list[str] = []
        self.t_acc: list[float] = []
        self.t_set: list[float] = []
        self.t_set_kafka: list[float] = []
        self.t_set_occurred: list[float] = []
        self.status: list[str | None] = []
        self.settled_count: list[int] = []
        self.answers: Counter[str] = Counter()
        self.settled_statuses: dict[int, set[str]] = defaultdict(set)
        self.accepted = 0
        self.settled = 0
        self.current: Step | None = None
        self.send_errors: list[str] = []
        self.profiles: dict[str, Any] = {}
        self._dead: set[str] = set()

    # -- the whole run --------------------------------------------------------------------------

    async def run(self) -> dict[str, Any]:
        began = time.time()
        await migrate_all(self.settings)
        self.pool = await open_pool(self.endpoints.database_url,
                                    application_name="intentledger-bench", max_size=4)
        self.stack = Stack(self.endpoints, self.settings.logs_dir, "bench-e2e")
        try:
            self.started_at = await self.pool.fetchval("SELECT now()")
            durability = await self._durability()
            await self._seed_wallets()
            await self._look_for_leftovers()
            await self._start_services()
            self.backlog = Backlog(self.endpoints.kafka_bootstrap)
            await self.backlog.start()
            await self._wait_caught_up()
            await self._start_clients()
            sampler = asyncio.create_task(self._sample())
            collector = asyncio.create_task(self._collect())
            try:
                await self._warm_up()
                await self._latency_phase()
                await self._ramp()
                drained = await self._drain()
            finally:
                self._stopping = True
                await asyncio.gather(sampler, collector, return_exceptions=True)
                await self._stop_clients()
                await self.backlog.stop()
            hops = await self._hops()
            correctness = await self._correctness(drained)
            cpu_end = self.meter.cpu()
            self.peaks = self.meter.peak_rss()  # while every process still runs
        finally:
            await self.stack.stop()
            await self.pool.close()
        correctness["duplicates_prevented"] |= self._consumer_totals()
        self._exit_statuses()
        baselines = await self._baselines() if self.config.baselines else {
            "dbos_workflows_per_s": None, "pgbench_tps": None,
            "reason": "skipped (--no-baselines)"}
        return self._result(began, durability, hops, correctness, baselines, cpu_end)

    # -- set-up ---------------------------------------------------------------------------------

    async def _durability(self) -> dict[str, Any]:
        async with self.pool.acquire() as conn:
            settings = {name: await conn.fetchval(f"SHOW {name}")
                        for name in ("synchronous_commit", "fsync", "full_page_writes",
                                     "wal_level", "shared_buffers", "max_connections")}
        return {"postgres": settings, "relay_producer": {"acks": "all", "enable_idempotence": True,
                                                         "linger_ms": 5},
                "load_producer": {"acks": "all", "enable_idempotence": True}}

    async def _seed_wallets(self) -> None:
        semaphore = asyncio.Semaphore(4)

        async def one(wallet_id: str) -> None:
            async with semaphore:
                if not await open_wallet(self.pool, wallet_id, "EUR", OPENING_BALANCE_MINOR):
                    raise RuntimeError(f"wallet {wallet_id} exists already")

        await asyncio.gather(*(one(w) for w in self.wallet_ids))

    async def _look_for_leftovers(self) -> None:
        leftovers = await self.pool.fetchval(
            "SELECT count(*) FROM dispatcher.calls WHERE state = ANY($1::text[])", list(MOVING))
        if leftovers:
            self.warnings.append(f"{leftovers} calls of earlier runs were in flight at the start; "
                                 "this run's dispatcher steps them too")

    def _env(self, service: str) -> dict[str, str]:
        env: dict[str, str] = {}
        if service == "proposal-intake":
            env |= {"INTENTLEDGER_INTAKE_TOOLS_FILE": str(TOOLS_FILE),
                    # budgets are not what this measures: no run runs out of calls or attempts
                    "INTENTLEDGER_INTAKE_DEFAULT_MAX_CALLS": "100000",
                    "INTENTLEDGER_INTAKE_DEFAULT_MAX_ATTEMPTS": "1000000"}
        if service == "policy":
            env |= {"INTENTLEDGER_POLICY_POLICY_FILE": str(POLICY_FILE),
                    "INTENTLEDGER_INTAKE_TOOLS_FILE": str(TOOLS_FILE)}
        if service == "dispatcher":
            env |= {"INTENTLEDGER_DISPATCHER_POLICY_FILE": str(POLICY_FILE),
                    "INTENTLEDGER_DISPATCHER_TOOLS_FILE": str(TOOLS_FILE)}
        return env | self.config.env.get(service, {})

    async def _start_services(self) -> None:
        # The relay first: the others' start-up (topics, migrations) needs nothing from it, but
        # starting six Python processes at once on two cores only makes each slower.
        await self.stack.start("relay", self._env("relay"))
        await asyncio.gather(*(self.stack.start(service, self._env(service))
                               for service in SERVICES[1:]))
        for service, count in self.config.replicas.items():
            for _ in range(count - 1):
                await self.stack.start(service, self._env(service))
        for replica in self.stack.replicas.values():
            assert replica.process is not None
            self.meter.add(replica.label, replica.process.pid, "python")
        for name, (pid, note) in infrastructure_pids(self.settings).items():
            self.meter.add(name, pid, name, note)
        self.meter.add("harness", os.getpid(), "python")

    async def _wait_caught_up(self, limit_s: float = 120.0) -> None:
        """Start from a quiet pipeline: every group at the end of its topics, outboxes empty."""
        deadline = time.monotonic() + limit_s
        while True:
            lag = await self.backlog.lag()
            pending = await self._outbox_pending()
            if not any(lag.values()) and not any(pending.values()):
                return
            if time.monotonic() > deadline:
                self.warnings.append(f"the pipeline was not quiet at the start: lag {lag}, "
                                     f"outbox {pending}")
                return
            await asyncio.sleep(0.5)

    async def _start_clients(self) -> None:
        self.producer = AIOKafkaProducer(**client_options(self.endpoints.kafka_bootstrap),
                                         acks="all", enable_idempotence=True, linger_ms=1)
        await self.producer.start()
        self.results = AIOKafkaConsumer(**client_options(self.endpoints.kafka_bootstrap),
                                        group_id=None, enable_auto_commit=False,
                                        max_poll_records=5000)
        await self.results.start()
        partitions = await self.backlog.partitions(AGENT_RESULTS)
        if not partitions:
            raise RuntimeError(f"{AGENT_RESULTS} has no partitions: did the intake start?")
        self.results.assign(partitions)
        await self.results.seek_to_end(*partitions)
        for partition in partitions:  # resolve the end now: no answer can slip past
            await self.results.position(partition)
        self._stopping = False

    async def _stop_clients(self) -> None:
        await self.producer.stop()
        await self.results.stop()

    # -- load ------------------------------------------------------------------------------------

    def _run_of(self, i: int) -> str:
        """``active_runs`` runs at a time, each getting ``calls_per_run`` calls spread over its
        life (an agent session), then the next generation of runs."""
        runs = self.config.active_runs
        generation, slot = divmod(i, runs)
        return f"{self.prefix}-g{generation // self.config.calls_per_run}-r{slot}"

    def _proposal(self, i: int) -> tuple[bytes, bytes, str]:
        run_id = self._run_of(i)
        call_id = f"call_{self.nonce}_{i}"
        key = f"{self.prefix}-op-{i}"
        arguments = {"wallet_id": self.wallet_ids[i % len(self.wallet_ids)], "amount": AMOUNT,
                     "currency": "EUR"}
        fmt = self.config.formats[i % len(self.config.formats)]
        message: dict[str, Any] = {"run_id": run_id, "principal_id": "agent-7", "tenant_id": "acme"}
        if fmt == "generic":
            message |= {"format": "generic", "tool": "wallet.debit", "call_id": call_id,
                        "arguments": arguments, "operation_key": key}
        elif fmt == "openai.chat":  # as the Chat Completions API returns the assistant message
            message |= {"format": "openai.chat", "operation_keys": {call_id: key}, "message": {
                "role": "assistant", "content": None, "tool_calls": [
                    {"id": call_id, "type": "function",
                     "function": {"name": "wallet_debit", "arguments": json.dumps(arguments)}}]}}
        elif fmt == "openai.responses":
            message |= {"format": "openai.responses", "operation_keys": {call_id: key},
                        "output": [{"type": "function_call", "id": f"fc_{i}", "call_id": call_id,
                                    "name": "wallet_debit", "status": "completed",
                                    "arguments": json.dumps(arguments)}]}
        else:
            message |= {"format": "anthropic", "operation_keys": {call_id: key}, "message": {
                "role": "assistant", "content": [{"type": "tool_use", "id": call_id,
                                                  "name": "wallet_debit", "input": arguments}]}}
        return run_id.encode(), json.dumps(message).encode(), fmt

    async def _publish(self, step: Step) -> None:
        i = len(self.t_pub)
        key, value, fmt = self._proposal(i)
        self.t_pub.append(time.time())
        self.step_of.append(step.index)
        self.formats.append(fmt)
        for column in (self.t_acc, self.t_set, self.t_set_kafka, self.t_set_occurred):
            column.append(math.nan)
        self.status.append(None)
        self.settled_count.append(0)
        sent = await self.producer.send(AGENT_PROPOSALS, value, key=key)
        sent.add_done_callback(self._sent)

    def _sent(self, future: asyncio.Future) -> None:
        if future.cancelled() or future.exception() is not None:
            self.send_errors.append(repr(future.exception()) if not future.cancelled()
                                    else "cancelled")

    async def _generate(self, step: Step, seconds: float) -> None:
        """Open loop: proposal k of the step is due at ``k / rate`` seconds; whatever is due is
        sent at once, however far behind the answers are."""
        step.first = len(self.t_pub)
        step.started = time.time()
        self.current = step
        began = time.monotonic()
        total = int(round(step.rate * seconds))
        sent = 0
        while sent < total and not step.stop.is_set():
            elapsed = time.monotonic() - began
            due = min(total, int(elapsed * step.rate) + 1)
            if due > sent:
                step.generator_lag_ms.append(max(0.0, (elapsed - sent / step.rate) * 1000))
            while sent < due:
                await self._publish(step)
                sent += 1
            await asyncio.sleep(max(0.0, min(TICK_S, began + sent / step.rate - time.monotonic())))
        step.ended = time.time()
        step.last = len(self.t_pub)
        self.current = None

    async def _warm_up(self) -> None:
        """A few proposals first (prepared statements, metadata, connections), not measured."""
        if self.config.warmup_s <= 0:
            return
        step = Step(-1, 20, self.config.warmup_s)
        self.warmup = step
        await self._generate(step, self.config.warmup_s)
        deadline = time.monotonic() + 60
        while self.settled < step.last and time.monotonic() < deadline:
            await asyncio.sleep(0.2)
        if self.settled < step.last:
            self.problems.append(f"warm-up: only {self.settled} of {step.last} proposals settled "
                                 "within 60 s; is every service running?")

    async def _latency_phase(self) -> None:
        """The headline: ``latency_rate`` offered for ``latency_s`` on its own (judged like a
        step, cut short the same way if its backlog explodes), then the stack drains before the
        ramp starts, so the ramp's first steps are not measured against this phase's backlog."""
        if not self.config.latency_rate:
            return
        step = Step(len(self.steps), self.config.latency_rate, self.config.latency_s,
                    phase="latency")
        self.steps.append(step)
        await self._generate(step, step.planned_s)
        await asyncio.sleep(max(0.0, step.ended + self.config.grace_s - time.time()))
        step.verdict = self._judge(step)
        drained = await self._drain()
        step.drained_after_s = drained["seconds"]
        if not drained["drained"]:
            self.warnings.append(f"the latency phase had not drained after {drained['seconds']} s "
                                 f"({drained['last_look']}); the ramp starts on its backlog")

    async def _ramp(self) -> None:
        previous: Step | None = None
        for rate in self.config.rates:
            step = Step(len(self.steps), rate, self.config.step_s)
            self.steps.append(step)
            tasks = [asyncio.create_task(self._generate(step, step.planned_s))]
            if previous is not None:
                tasks.append(asyncio.create_task(self._judge_later(previous, step)))
            if self.config.profile_rate == rate:
                tasks.append(asyncio.create_task(self._profile(step)))
            await asyncio.gather(*tasks)
            if step.stop_reason and previous is not None and not previous.verdict["sustainable"]:
                break  # cut short because the previous step was already not sustainable
            previous = step
            if step.stop_reason:  # its backlog exploded: no point going higher
                break
        last = self.steps[-1]
        if last.verdict is None:
            await asyncio.sleep(max(0.0, last.ended + self.config.grace_s - time.time()))
            last.verdict = self._judge(last)

    async def _judge_later(self, step: Step, following: Step) -> None:
        """Judge ``step`` ``grace_s`` after it ended (its last proposals had time to settle);
        if it was not sustainable, the following step is cut short."""
        await asyncio.sleep(max(0.0, step.ended + self.config.grace_s - time.time()))
        step.verdict = self._judge(step)
        if not step.verdict["sustainable"] and not following.stop.is_set():
            following.stop_reason = f"cut short: the {step.rate}/s step was not sustainable"
            following.stop.set()

    def _judge(self, step: Step) -> dict[str, Any]:
        reasons = []
        half = step.started + (step.ended - step.started) / 2
        late = [self._latency_ms(i, inf_if_missing=True) for i in range(step.first, step.last)
                if self.t_pub[i] >= half]
        p99 = _quantile(sorted(late), 0.99) if late else math.nan
        if step.stop_reason:
            reasons.append(step.stop_reason)
        if not late or not p99 <= self.config.max_p99_ms:
            reasons.append(f"p99 of its second half {p99:.0f} ms > {self.config.max_p99_ms:.0f} ms")
        backlog = self._backlog_at(step.ended)
        bound = max(200.0, step.rate * self.config.max_backlog_s)
        if backlog is None or backlog > bound:
            reasons.append(f"backlog at its end {backlog} > {bound:.0f}")
        offered = (step.last - step.first) / max(step.ended - step.started, 1e-9)
        if offered < 0.95 * step.rate:
            reasons.append(f"the generator offered only {offered:.0f}/s")
        return {"sustainable": not reasons, "reasons": reasons, "second_half_p99_ms": p99,
                "backlog_at_end": backlog, "backlog_bound": bound}

    def _backlog_at(self, when: float) -> int | None:
        nearest = min(self.timeline, key=lambda s: abs(s["t"] - when), default=None)
        return nearest["backlog"] if nearest else None

    def _latency_ms(self, i: int, *, inf_if_missing: bool = False) -> float:
        settled = self.t_set[i]
        if math.isnan(settled):
            return math.inf if inf_if_missing else math.nan
        return (settled - self.t_pub[i]) * 1000

    async def _drain(self) -> dict[str, Any]:
        """Until every proposal is settled and the pipeline is quiet (twice in a row), or
        ``drain_s``."""
        began = time.monotonic()
        previous_quiet = False
        look: dict[str, Any] = {}
        while True:
            published = len(self.t_pub)
            moving = await self.pool.fetchval(
                "SELECT count(*) FROM dispatcher.calls WHERE run_id LIKE $1 "
                "AND state = ANY($2::text[])", self.prefix + "-%", list(MOVING))
            lag = await self.backlog.lag()
            pending = await self._outbox_pending()
            look = {"published": published, "settled": self.settled, "moving_calls": moving,
                    "lag": lag, "outbox_pending": pending}
            quiet = (self.settled >= published and not moving and not any(lag.values())
                     and not any(pending.values()))
            if quiet and previous_quiet:
                return {"drained": True, "seconds": round(time.monotonic() - began, 1),
                        "last_look": look}
            previous_quiet = quiet
            if time.monotonic() - began > self.config.drain_s:
                return {"drained": False, "seconds": round(time.monotonic() - began, 1),
                        "last_look": look}
            await asyncio.sleep(0.5)

    # -- answers on agent.results ----------------------------------------------------------------

    async def _collect(self) -> None:
        prefix = self.prefix.encode()
        while not self._stopping:
            batch = await self.results.getmany(timeout_ms=100, max_records=5000)
            now = time.time()
            for records in batch.values():
                for record in records:
                    headers = dict(record.headers or ())
                    if not headers.get("run_id", b"").startswith(prefix):
                        continue
                    self._answer(record, now)

    def _answer(self, record, now: float) -> None:
        envelope = json.loads(record.value)
        payload = envelope.get("payload") or {}
        kind = envelope.get("event_type")
        call_id = str(payload.get("call_id") or "")
        try:
            i = int(call_id.rsplit("_", 1)[1])
        except (IndexError, ValueError):
            self.answers["unmatched"] += 1
            return
        if i >= len(self.t_pub):
            self.answers["unmatched"] += 1
            return
        if kind == PROPOSAL_ACCEPTED:
            self.answers["accepted"] += 1
            if math.isnan(self.t_acc[i]):
                self.t_acc[i] = now
                self.accepted += 1
        elif kind in (DUPLICATE_PROPOSAL, PROPOSAL_REJECTED):
            self.answers["duplicate" if kind == DUPLICATE_PROPOSAL else "rejected"] += 1
            self.answers[f"reason:{payload.get('reason_code')}"] += 1
        elif kind == TOOL_CALL_SETTLED:
            self.answers["settled"] += 1
            self.settled_count[i] += 1
            self.settled_statuses[i].add(str(payload.get("status")))
            if math.isnan(self.t_set[i]):
                self.t_set[i] = now
                self.t_set_kafka[i] = record.timestamp / 1000
                self.t_set_occurred[i] = datetime.fromisoformat(envelope["occurred_at"]).timestamp()
                self.status[i] = payload.get("status")
                self.settled += 1

    # -- sampling --------------------------------------------------------------------------------

    async def _outbox_pending(self) -> dict[str, int]:
        rows = await self.pool.fetch(" UNION ALL ".join(
            f"SELECT '{schema}' AS schema, count(*) AS n FROM \"{schema}\".outbox "
            "WHERE status = 'pending'" for schema in OUTBOX_SCHEMAS))
        return {row["schema"]: row["n"] for row in rows}

    async def _sample(self) -> None:
        while not self._stopping:
            began = time.monotonic()
            try:
                lag = await self.backlog.lag()
                pending = await self._outbox_pending()
                due = await self.pool.fetchval(
                    "SELECT count(*) FROM dispatcher.calls WHERE next_action_at <= now()")
            except Exception as error:  # a slow sample is data too; a failed one is skipped
                log.warning("sample failed: %s", error)
                await asyncio.sleep(SAMPLE_S)
                continue
            backlog = sum(lag.values()) + sum(pending.values()) + due
            self._died_unasked()
            step = self.current
            self.timeline.append({
                "t": time.time(), "step": step.index if step else None,
                "published": len(self.t_pub), "accepted": self.accepted, "settled": self.settled,
                "lag": lag, "outbox_pending": pending, "dispatcher_due": due, "backlog": backlog,
                "cpu_s": self.meter.cpu(), "rss": self.meter.memory(),
                "machine_busy_s": self.meter.machine_busy()})
            if step is not None and step.index >= 0 and not step.stop.is_set() and \
                    backlog > max(2000, step.rate * self.config.abort_backlog_s):
                step.stop_reason = (f"cut short: backlog {backlog} passed "
                                    f"{self.config.abort_backlog_s:.0f} s of load")
                step.stop.set()
            await asyncio.sleep(max(0.0, SAMPLE_S - (time.monotonic() - began)))

    # -- profiling -------------------------------------------------------------------------------

    async def _profile(self, step: Step) -> None:
        """py-spy on every service process during part of ``step`` (raw collapsed stacks), and
        the functions most often on CPU in each."""
        py_spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
        if not Path(py_spy).exists():
            self.profiles["error"] = "py-spy is not installed (pip install py-spy)"
            return
        await asyncio.sleep(min(5.0, step.planned_s / 4))
        seconds = max(1, int(min(self.config.profile_s, step.planned_s - 5)))
        folder = self.config.out / "profiles"
        folder.mkdir(parents=True, exist_ok=True)
        step.profiled = True
        spies = {}
        for replica in self.stack.replicas.values():
            assert replica.process is not None
            path = folder / f"{replica.label}-{step.rate}.txt"
            spies[replica.label] = (path, await asyncio.create_subprocess_exec(
                py_spy, "record", "--pid", str(replica.process.pid), "--duration", str(seconds),
                "--rate", "50", "--format", "raw", "--nonblocking", "--output", str(path),
                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE))
        for label, (path, process) in spies.items():
            _, error = await process.communicate()
            if process.returncode != 0 or not path.exists():
                self.profiles[label] = {"error": error.decode(errors="replace")[-300:]}
                continue
            self.profiles[label] = _summarise_profile(path) | {"file": str(path), "rate": step.rate,
                                                               "seconds": seconds}

    # -- after the run ---------------------------------------------------------------------------

    async def _hops(self) -> dict[str, Any]:
        """Per-hop latency from the ledger's own timestamps: the events' ``occurred_at`` in the
        projection's history, the wallet's debit row, the settled announcement and our clock."""
        rows = await self.pool.fetch(
            "SELECT lc.provider_call_id AS call_id,"
            " min(e.occurred_at) FILTER (WHERE e.event_type = 'ProposalAccepted') AS accepted,"
            " min(e.occurred_at) FILTER (WHERE e.event_type = 'AuthorizationAllowed') AS authorized,"
            " min(e.occurred_at) FILTER (WHERE e.event_type = 'DispatchIntentRecorded') AS intent,"
            " min(e.occurred_at) FILTER (WHERE e.event_type = 'ToolAttemptStarted') AS attempt,"
            " max(e.occurred_at) FILTER (WHERE e.event_type = 'ToolResultRecorded') AS result,"
            " (SELECT min(d.created_at) FROM wallet.debits d"
            "   WHERE d.logical_call_id = lc.logical_call_id) AS debited"
            " FROM proposal_intake.logical_calls lc"
            " JOIN projection.events e ON e.logical_call_id = lc.logical_call_id"
            " WHERE lc.run_id LIKE $1 GROUP BY lc.provider_call_id, lc.logical_call_id",
            self.prefix + "-%")
        names = ("publish → intake accepted", "intake → policy allowed",
                 "policy → dispatcher intent", "intent → attempt started",
                 "attempt → wallet debit", "wallet debit → result recorded",
                 "result → settled announced", "announced → agent received")
        per_step: dict[int, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
        for row in rows:
            try:
                i = int(row["call_id"].rsplit("_", 1)[1])
            except (IndexError, ValueError):
                continue
            if i >= len(self.t_pub):
                continue
            points = [self.t_pub[i], *(_epoch(row[c]) for c in ("accepted", "authorized",
                                                                 "intent", "attempt", "debited",
                                                                 "result")),
                      self.t_set_occurred[i], self.t_set[i]]
            for name, start, end in zip(names, points, points[1:]):
                if not (math.isnan(start) or math.isnan(end)):
                    per_step[self.step_of[i]][name].append((end - start) * 1000)
        return {"hops": list(names), "per_step": {
            str(step): {name: _summary(values) for name, values in hops.items()}
            for step, hops in sorted(per_step.items())}}

    async def _correctness(self, drained: dict[str, Any]) -> dict[str, Any]:
        pattern = self.prefix + "-%"
        wallets = self.prefix.replace("_", r"\_")
        published = len(self.t_pub)
        failures: list[str] = []
        async with self.pool.acquire() as conn:
            intake = await conn.fetchrow(
                "SELECT count(*) AS calls, count(DISTINCT operation_key) AS keys,"
                " count(DISTINCT (run_id, provider_call_id)) AS proposals"
                " FROM proposal_intake.logical_calls WHERE run_id LIKE $1", pattern)
            dispatcher_states = dict(await conn.fetch(
                "SELECT state, count(*) FROM dispatcher.calls WHERE run_id LIKE $1"
                " AND compensates IS NULL GROUP BY state", pattern))
            compensations = await conn.fetchval(
                "SELECT count(*) FROM dispatcher.calls WHERE run_id LIKE $1"
                " AND compensates IS NOT NULL", pattern)
            projection_states = dict(await conn.fetch(
                "SELECT state, count(*) FROM projection.calls WHERE run_id LIKE $1"
                " AND compensates IS NULL GROUP BY state", pattern))
            disagree = await conn.fetchval(
                "SELECT count(*) FROM dispatcher.calls d LEFT JOIN projection.calls p"
                " USING (logical_call_id) WHERE d.run_id LIKE $1"
                " AND p.state IS DISTINCT FROM d.state", pattern)
            not_at_dispatcher = await conn.fetchval(
                "SELECT count(*) FROM proposal_intake.logical_calls lc WHERE lc.run_id LIKE $1"
                " AND NOT EXISTS (SELECT 1 FROM dispatcher.calls d"
                "                 WHERE d.logical_call_id = lc.logical_call_id)", pattern)
            effects = await conn.fetch(
                "SELECT c.state, coalesce(d.n, 0) AS debits, count(*) AS calls"
                " FROM dispatcher.calls c LEFT JOIN (SELECT operation_key, count(*) AS n"
                "   FROM wallet.debits WHERE wallet_id LIKE $2 GROUP BY operation_key) d"
                "   USING (operation_key)"
                " WHERE c.run_id LIKE $1 AND c.compensates IS NULL GROUP BY 1, 2",
                pattern, f"tenant/acme/{wallets}-%")
            orphans = await conn.fetchval(
                "SELECT count(*) FROM wallet.debits w WHERE w.wallet_id LIKE $1 AND NOT EXISTS"
                " (SELECT 1 FROM dispatcher.calls c WHERE c.operation_key = w.operation_key)",
                f"tenant/acme/{wallets}-%")
            balances = await conn.fetchval(
                "SELECT count(*) FROM wallet.wallets w WHERE w.id LIKE $1 AND w.balance_minor <>"
                " $2 - coalesce((SELECT sum(amount_minor) FROM wallet.debits d"
                "                WHERE d.wallet_id = w.id), 0)"
                "    + coalesce((SELECT sum(amount_minor) FROM wallet.refunds r"
                "                WHERE r.wallet_id = w.id), 0)",
                f"tenant/acme/{wallets}-%", OPENING_BALANCE_MINOR)
            attempts = dict(await conn.fetch(
                "SELECT a.kind, count(*) FROM dispatcher.attempts a JOIN dispatcher.calls c"
                " USING (logical_call_id) WHERE c.run_id LIKE $1 GROUP BY a.kind", pattern))
            dispatched = await conn.fetchval(
                "SELECT count(DISTINCT a.logical_call_id) FROM dispatcher.attempts a"
                " JOIN dispatcher.calls c USING (logical_call_id) WHERE c.run_id LIKE $1", pattern)
            replayed = await conn.fetchval(
                "SELECT count(*) FROM dispatcher.attempts a JOIN dispatcher.calls c"
                " USING (logical_call_id) WHERE c.run_id LIKE $1"
                " AND (a.receipt ->> 'replayed')::boolean", pattern)
            stale = await conn.fetchval(
                "SELECT count(*) FROM dispatcher.stale_writes WHERE run_id LIKE $1", pattern)
            set_aside = []
            for schema in OUTBOX_SCHEMAS:
                set_aside += [f"dead letter in {schema}: {r['consumer']} {r['topic']}: {r['reason']}"
                              for r in await conn.fetch(
                                  f'SELECT consumer, topic, reason FROM "{schema}".dead_letters'
                                  " WHERE created_at >= $1", self.started_at)]
                set_aside += [f"parked in {schema}: {r['topic']}: {r['park_reason']}"
                              for r in await conn.fetch(
                                  f'SELECT topic, park_reason FROM "{schema}".outbox'
                                  " WHERE status = 'parked' AND created_at >= $1", self.started_at)]
            events = 0
            for schema in OUTBOX_SCHEMAS:
                events += await conn.fetchval(f'SELECT count(*) FROM "{schema}".outbox'
                                              " WHERE partition_key LIKE $1", pattern)

        wrong_effects = [{"state": r["state"], "debits": r["debits"], "calls": r["calls"]}
                         for r in effects if r["debits"] != EXPECTED_DEBITS.get(r["state"], -1)
                         and not (r["state"] == "MANUAL_REVIEW" and r["debits"] <= 1)]
        unsettled = {state: n for state, n in dispatcher_states.items() if state not in TERMINAL}
        unanswered = published - self.accepted
        not_settled = published - self.settled
        contradictory = sum(1 for statuses in self.settled_statuses.values()
                            if len(statuses - {"SUCCEEDED", "COMPENSATED"}) and len(statuses) > 1)
        repeated = sum(1 for n in self.settled_count if n > 1)
        if not drained["drained"]:
            failures.append(f"not drained within {self.config.drain_s:.0f} s: {drained['last_look']}")
        if intake["proposals"] != published:
            failures.append(f"{published} proposals published, {intake['proposals']} known to "
                            "the intake (lost or extra proposals)")
        if intake["keys"] != intake["calls"]:
            failures.append(f"{intake['calls']} logical calls but {intake['keys']} operation keys")
        if unanswered:
            failures.append(f"{unanswered} proposals without ProposalAccepted on {AGENT_RESULTS}")
        if self.answers["rejected"] or self.answers["duplicate"]:
            failures.append(f"{self.answers['rejected']} rejected and {self.answers['duplicate']} "
                            "duplicate answers to proposals that were all new and valid")
        if not_at_dispatcher:
            failures.append(f"{not_at_dispatcher} accepted calls never reached the dispatcher")
        if unsettled:
            failures.append(f"calls not in a terminal state: {unsettled}")
        if disagree:
            failures.append(f"{disagree} calls whose projection state differs from the dispatcher's")
        if wrong_effects:
            failures.append(f"wallet debits per operation key not as the state says: {wrong_effects}")
        if orphans:
            failures.append(f"{orphans} debits of the benchmark's wallets belong to no call")
        if balances:
            failures.append(f"{balances} wallets whose balance is not opening - debits + refunds")
        if not_settled:
            failures.append(f"{not_settled} proposals never got a ToolCallSettled")
        if contradictory:
            failures.append(f"{contradictory} calls announced with contradicting statuses")
        if set_aside:
            failures.append(f"records set aside: {set_aside[:10]}")
        if self.send_errors:
            failures.append(f"{len(self.send_errors)} proposals failed to publish: "
                            f"{self.send_errors[:3]}")
        sends, lookups = attempts.get("send", 0), attempts.get("lookup", 0)
        succeeded = dispatcher_states.get("SUCCEEDED", 0)
        return {
            "passed": not failures, "failures": failures, "drain": drained,
            "proposals_published": published, "accepted_answers": self.accepted,
            "answers_on_agent_results": dict(self.answers), "intake_logical_calls": intake["calls"],
            "distinct_operation_keys": intake["keys"], "dispatcher_states": dispatcher_states,
            "projection_states": projection_states, "compensations": compensations,
            "projection_disagrees": disagree,
            "wallet_debits_per_call": [dict(r) for r in effects],
            "calls_with_exactly_one_debit": sum(r["calls"] for r in effects if r["debits"] == 1),
            "succeeded_calls": succeeded, "orphan_debits": orphans,
            "wallets_out_of_balance": balances,
            "attempts": {"send": sends, "lookup": lookups},
            "retry_amplification": round((sends + lookups) / dispatched, 4) if dispatched else None,
            "sends_per_dispatched_call": round(sends / dispatched, 4) if dispatched else None,
            "settled_announcements_repeated": repeated,
            "duplicates_prevented": {"replayed_receipts": replayed, "stale_writes_refused": stale},
            "set_aside": set_aside, "ledger_events_published": events,
            "ledger_events_per_proposal": round(events / published, 2) if published else None,
        }

    def _consumer_totals(self) -> dict[str, Any]:
        """Each consumer's committed totals, from the line it logs when it stops:
        ``BatchReport(applied=..., duplicates=..., dead_lettered=[...])``."""
        totals: dict[str, Any] = {}
        pattern = re.compile(r"stopped: BatchReport\(applied=(\d+), duplicates=(\d+)")
        for replica in self.stack.replicas.values():
            if not replica.log_path.exists():
                continue
            found = pattern.findall(replica.log_path.read_text(errors="replace"))
            if found:
                applied, duplicates = found[-1]
                totals[f"inbox_{replica.label}"] = {"applied": int(applied),
                                                    "duplicates": int(duplicates)}
        return totals

    def _died_unasked(self) -> None:
        """A service that ended during the run invalidates it (nothing restarts it here)."""
        for replica in self.stack.replicas.values():
            if not replica.running and replica.label not in self._dead:
                self._dead.add(replica.label)
                status = replica.process.poll() if replica.process else None
                self.problems.append(f"{replica.label} died during the run (exit {status}); "
                                     f"see {replica.log_path}")

    def _exit_statuses(self) -> None:
        for replica in self.stack.replicas.values():
            status = replica.process.returncode if replica.process else None
            if replica.label not in self._dead and status not in (0, None):
                self.warnings.append(f"{replica.label} exited with {status} when stopped (not 0: "
                                     f"it did not finish within the stop grace); see "
                                     f"{replica.log_path}")

    async def _baselines(self) -> dict[str, Any]:
        """The peer and the baselines, from ``bench.baselines`` when that package offers them."""
        return await run_baselines(self.endpoints, quick=self.config.quick, out=self.config.out)

    # -- the result ------------------------------------------------------------------------------

    def _result(self, began: float, durability: dict[str, Any], hops: dict[str, Any],
                correctness: dict[str, Any], baselines: dict[str, Any],
                cpu_end: dict[str, float]) -> dict[str, Any]:
        steps = [self._step_figures(step, hops) for step in self.steps]
        for step in steps:
            other = step["cpu"].get("other processes", {}).get("cores", 0.0)
            if other > OTHER_LOAD_WARNING_CORES:
                self.warnings.append(
                    f"{step['phase']} {step['rate_per_s']}/s: other processes used {other:.2f} "
                    "cores of the machine during the step; its figures are lower than this "
                    "stack alone would reach")
        sustainable = [s for s in steps if s["sustainable"] and s["phase"] == "ramp"]
        best = max(sustainable, key=lambda s: s["offered_per_s"], default=None)
        headline = next((s for s in steps if s["phase"] == "latency"), None) or \
            min(steps, key=lambda s: abs(s["rate_per_s"] - HEADLINE_RATE), default=None)
        peaks = getattr(self, "peaks", {})
        sampled_peak: dict[str, int] = {}
        for sample in self.timeline:
            for name, value in sample["rss"].items():
                sampled_peak[name] = max(sampled_peak.get(name, 0), value)
        first = self.timeline[0]["cpu_s"] if self.timeline else {}
        processes = {}
        for name in self.meter.processes:
            processes[name] = {
                "cpu_s": round(cpu_end.get(name, 0.0) - first.get(name, 0.0), 2),
                "peak_rss_mb": _mb(peaks.get(name) or sampled_peak.get(name)),
                "peak_rss_source": "VmHWM (kernel high-water mark)" if peaks.get(name) else
                ("largest 5 s sample of the PSS sum" if self.meter.kinds.get(name) == "postgres"
                 else "largest 1 s sample of the RSS"),
            }
        processes_notes = dict(self.meter.notes)
        measured_total = sum(p["cpu_s"] for n, p in processes.items() if n != "harness")
        python_services = {n: p["peak_rss_mb"] for n, p in processes.items()
                           if self.meter.kinds.get(n) == "python" and n != "harness"}
        result = {
            "benchmark": "end-to-end",
            "passed": correctness["passed"] and not self.problems,
            "cores": os.cpu_count(),
            "sustained_proposals_per_s": best["rate_per_s"] if best else None,
            "sustained_settled_per_s": best["settled_per_s"] if best else None,
            "p50_ms": headline and headline["settled_ms"]["p50"],
            "p95_ms": headline and headline["settled_ms"]["p95"],
            "p99_ms": headline and headline["settled_ms"]["p99"],
            "max_ms": headline and headline["settled_ms"]["max"],
            "accepted_p50_ms": headline and headline["accepted_ms"]["p50"],
            "accepted_p99_ms": headline and headline["accepted_ms"]["p99"],
            "latency_at_rate_per_s": headline and headline["rate_per_s"],
            "latency_phase_sustainable": headline and headline["sustainable"],
            "headline_step": headline and headline["index"],
            "dbos_workflows_per_s": baselines.get("dbos_workflows_per_s"),
            "pgbench_tps": baselines.get("pgbench_tps"),
            "baselines": baselines,
            "sustained_vs_dbos": round(best["rate_per_s"] / baselines["dbos_workflows_per_s"], 2)
            if best and baselines.get("dbos_workflows_per_s") else None,
            "max_python_service_rss_mb": max(python_services.values(), default=None),
            "events_per_cpu_s": round(correctness["ledger_events_published"] / measured_total, 1)
            if measured_total else None,
            "proposals_per_cpu_s": round(len(self.t_pub) / measured_total, 2) if measured_total
            else None,
            "criteria": {"max_p99_ms": self.config.max_p99_ms,
                         "max_backlog_s": self.config.max_backlog_s,
                         "abort_backlog_s": self.config.abort_backlog_s,
                         "grace_s": self.config.grace_s,
                         "rule": "sustainable: p99 of the step's second half (unsettled = late) "
                                 "within max_p99_ms, backlog at its end within max_backlog_s of "
                                 "its rate, and the generator kept up"},
            "config": {"rates": self.config.rates, "step_s": self.config.step_s,
                       "calls_per_run": self.config.calls_per_run,
                       "active_runs": self.config.active_runs, "wallets": self.config.wallets,
                       "formats": self.config.formats, "replicas": self.config.replicas,
                       "env": self.config.env, "policy": str(POLICY_FILE.relative_to(ROOT)),
                       "tools": str(TOOLS_FILE.relative_to(ROOT)), "nonce": self.nonce},
            "durability": durability,
            "steps": steps,
            "hops": hops["hops"],
            "processes": processes,
            "processes_not_measured": processes_notes,
            "correctness": correctness,
            "profiles": self.profiles,
            "problems": self.problems,
            "warnings": self.warnings,
            "started_at": datetime.fromtimestamp(began).astimezone().isoformat(timespec="seconds"),
            "elapsed_s": round(time.time() - began, 1),
            "logs": self.stack.logs(),
        }
        result["passed"] = bool(result["passed"])
        return result

    def _step_figures(self, step: Step, hops: dict[str, Any]) -> dict[str, Any]:
        indices = range(step.first, step.last)
        duration = max(step.ended - step.started, 1e-9)
        settled = sorted(x for x in (self._latency_ms(i) for i in indices) if not math.isnan(x))
        accepted = sorted((self.t_acc[i] - self.t_pub[i]) * 1000 for i in indices
                          if not math.isnan(self.t_acc[i]))
        in_window = sum(1 for i in range(len(self.t_set))
                        if step.started <= self.t_set[i] < step.ended)
        samples = [s for s in self.timeline if step.started <= s["t"] <= step.ended]
        cpu = {}
        if len(samples) >= 2:
            span = samples[-1]["t"] - samples[0]["t"]
            for name, used in samples[-1]["cpu_s"].items():
                delta = used - samples[0]["cpu_s"].get(name, used)
                cpu[name] = {"cpu_s": round(delta, 2), "cores": round(delta / span, 3)}
            machine = samples[-1]["machine_busy_s"] - samples[0]["machine_busy_s"]
            ours = sum(v["cpu_s"] for v in cpu.values())
            cpu["machine (all processes)"] = {"cpu_s": round(machine, 2),
                                              "cores": round(machine / span, 3)}
            # Anything else on the machine (another benchmark, a build) competes for the cores.
            cpu["other processes"] = {"cpu_s": round(machine - ours, 2),
                                      "cores": round((machine - ours) / span, 3)}
        services_cpu = sum(v["cpu_s"] for n, v in cpu.items()
                           if n not in ("harness", "machine (all processes)", "other processes"))
        statuses = Counter(self.status[i] or "unsettled" for i in indices)
        lag_max = {group: max((s["lag"][group] for s in samples), default=0)
                   for group in GROUP_TOPICS}
        first_to_grow = None
        for sample in samples:
            grown = [g for g, n in sample["lag"].items() if n > max(100, step.rate * 0.5)]
            if sample["dispatcher_due"] > max(100, step.rate * 0.5):
                grown.append("dispatcher (calls due)")
            if grown:
                first_to_grow = {"t_into_step_s": round(sample["t"] - step.started, 1),
                                 "groups": grown}
                break
        count = step.last - step.first
        return {
            "index": step.index, "phase": step.phase, "rate_per_s": step.rate,
            "planned_s": step.planned_s, "drained_after_s": step.drained_after_s,
            "duration_s": round(duration, 2), "proposals": count,
            "offered_per_s": round(count / duration, 1),
            "settled_per_s": round(in_window / duration, 1),
            "sustainable": bool(step.verdict and step.verdict["sustainable"]),
            "verdict": step.verdict, "stop_reason": step.stop_reason, "profiled": step.profiled,
            "generator_lag_ms": _summary(step.generator_lag_ms),
            "settled_ms": _summary(settled), "accepted_ms": _summary(accepted),
            "unsettled": count - len(settled), "statuses": dict(statuses),
            "hops_ms": hops["per_step"].get(str(step.index), {}),
            "lag_max": lag_max,
            "outbox_pending_max": max((sum(s["outbox_pending"].values()) for s in samples),
                                      default=0),
            "dispatcher_due_max": max((s["dispatcher_due"] for s in samples), default=0),
            "backlog_max": max((s["backlog"] for s in samples), default=0),
            "first_backlog_to_grow": first_to_grow,
            "cpu": cpu,
            "proposals_per_cpu_s": round(count / services_cpu, 2) if services_cpu else None,
            "rss_max_mb": {name: _mb(max((s["rss"].get(name, 0) for s in samples), default=0))
                           for name in self.meter.processes},
        }


# -- helpers ---------------------------------------------------------------------------------


def _epoch(value: datetime | None) -> float:
    return value.timestamp() if value is not None else math.nan


def _quantile(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return math.nan
    position = q * (len(sorted_values) - 1)
    low = int(position)
    high = min(low + 1, len(sorted_values) - 1)
    if math.isinf(sorted_values[high]) or math.isinf(sorted_values[low]):
        return sorted_values[high]
    return sorted_values[low] + (sorted_values[high] - sorted_values[low]) * (position - low)


def _summary(values: list[float]) -> dict[str, float | int | None]:
    ordered = sorted(values)
    if not ordered:
        return {"n": 0, "p50": None, "p95": None, "p99": None, "max": None, "mean": None}
    return {"n": len(ordered), "p50": _r(_quantile(ordered, 0.50)),
            "p95": _r(_quantile(ordered, 0.95)), "p99": _r(_quantile(ordered, 0.99)),
            "max": _r(ordered[-1]), "mean": _r(float(np.mean(ordered)))}


def _r(value: float) -> float | None:
    return None if math.isnan(value) or math.isinf(value) else round(value, 2)


def _mb(value: int | None) -> float | None:
    return round(value / 2**20, 1) if value else None


def _summarise_profile(path: Path, top: int = 15) -> dict[str, Any]:
    """From py-spy's collapsed stacks: the share of samples each function is on top of the
    stack (self) and anywhere in it (inclusive)."""
    own: Counter[str] = Counter()
    anywhere: Counter[str] = Counter()
    total = 0
    for line in path.read_text(errors="replace").splitlines():
        stack, _, count = line.rpartition(" ")
        if not count.isdigit():
            continue
        n = int(count)
        total += n
        frames = [re.sub(r" \(.*?/(site-packages|work/main)/", " (", frame)
                  for frame in stack.split(";") if frame]
        if frames:
            own[frames[-1]] += n
        for frame in set(frames):
            anywhere[frame] += n
    share = (lambda n: round(100 * n / total, 1)) if total else (lambda n: 0.0)
    return {"samples": total,
            "self_percent": [(frame, share(n)) for frame, n in own.most_common(top)],
            "inclusive_percent": [(frame, share(n)) for frame, n in anywhere.most_common(top)]}


async def run_baselines(endpoints: Endpoints, *, quick: bool, out: Path) -> dict[str, Any]:
    """The baselines and the peer of ``bench.baselines``, measured after the pipeline stopped
    (on the same Kafka and PostgreSQL, with the machine to themselves).

    That package offers ``NAMES`` and ``baseline(name)``, a coroutine ``run(endpoints, **size)``
    returning a dict; ``dbos_workflows_per_s`` is ``dbos_peer``'s ``workflows_per_s`` and
    ``pgbench_tps`` is ``pgbench``'s ``tps``. It is imported guarded: when it is missing or a
    baseline fails, the figure is null and ``reason`` says why; the end-to-end figures stand."""
    figures: dict[str, Any] = {"dbos_workflows_per_s": None, "pgbench_tps": None}
    try:
        import bench.baselines as baselines  # noqa: PLC0415 (optional: written separately)
        names, runner = baselines.NAMES, baselines.baseline
    except Exception as error:  # not there, or not the interface expected
        return figures | {"reason": f"bench.baselines not usable: {type(error).__name__}: {error}"}
    smaller = {"seconds": 5.0, "records": 20_000, "rounds": 1, "latency_workflows": 50}
    details: dict[str, Any] = {}
    reasons = []
    for name in names:
        began = time.monotonic()
        try:
            run = runner(name)
            parameters = inspect.signature(run).parameters
            sizes = {k: v for k, v in smaller.items() if k in parameters} if quick else {}
            details[name] = await run(endpoints, **sizes)
            details[name]["wall_s"] = round(time.monotonic() - began, 1)
        except Exception as error:  # one baseline failing must not cost the others
            reasons.append(f"{name} failed: {type(error).__name__}: {error}")
            details[name] = {"error": f"{type(error).__name__}: {error}"}
    figures["details"] = details
    figures["dbos_workflows_per_s"] = (details.get("dbos_peer") or {}).get("workflows_per_s")
    figures["pgbench_tps"] = (details.get("pgbench") or {}).get("tps")
    for key, source in (("dbos_workflows_per_s", "dbos_peer"), ("pgbench_tps", "pgbench")):
        if figures[key] is None and not any(r.startswith(source) for r in reasons):
            reasons.append(f"{source} gave no figure for {key}")
    if reasons:
        figures["reason"] = "; ".join(reasons)
    return figures


def _parse_pairs(values: list[str], what: str) -> dict[str, int]:
    pairs = {}
    for value in values:
        service, _, count = value.partition("=")
        if service not in SERVICES or not count.isdigit() or int(count) < 1:
            raise SystemExit(f"--{what} {value!r}: expected SERVICE=N with SERVICE in {SERVICES}")
        pairs[service] = int(count)
    return pairs


def _parse_env(values: list[str]) -> dict[str, dict[str, str]]:
    env: dict[str, dict[str, str]] = defaultdict(dict)
    for value in values:
        service, _, assignment = value.partition(":")
        name, _, setting = assignment.partition("=")
        if service not in SERVICES or not name.startswith("INTENTLEDGER_"):
            raise SystemExit(f"--env {value!r}: expected SERVICE:INTENTLEDGER_NAME=VALUE")
        env[service][name] = setting
    return dict(env)


def parse_config(argv: list[str] | None = None) -> Config:
    parser = argparse.ArgumentParser(prog="python -m bench.e2e",
                                     description=__doc__.splitlines()[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog="\n".join(__doc__.splitlines()[1:6]))
    parser.add_argument("--quick", action="store_true",
                        help="smoke: 10 s steps, rates 25,50,100,200/s, no baselines unless asked")
    parser.add_argument("--rates", help=f"offered rates per step (default {FULL_RATES})")
    parser.add_argument("--step-seconds", type=float, help="length of each step (default 60)")
    parser.add_argument("--latency-rate", type=int, default=HEADLINE_RATE,
                        help="offered rate of the latency phase before the ramp (0: none)")
    parser.add_argument("--latency-seconds", type=float,
                        help="length of the latency phase (default: the step length)")
    parser.add_argument("--grace-seconds", type=float, default=5.0,
                        help="a step is judged this long after it ended")
    parser.add_argument("--drain-seconds", type=float, help="longest wait for the stack to drain")
    parser.add_argument("--warmup-seconds", type=float, default=3.0)
    parser.add_argument("--calls-per-run", type=int, default=10)
    parser.add_argument("--active-runs", type=int, default=256)
    parser.add_argument("--wallets", type=int, default=1000)
    parser.add_argument("--formats", default="generic,openai.chat",
                        help="proposal formats, taken in turn (generic, openai.chat, "
                             "openai.responses, anthropic)")
    parser.add_argument("--max-p99-ms", type=float, default=1000.0)
    parser.add_argument("--max-backlog-s", type=float, default=2.0)
    parser.add_argument("--abort-backlog-s", type=float, default=15.0)
    parser.add_argument("--replicas", action="append", default=[], metavar="SERVICE=N")
    parser.add_argument("--env", action="append", default=[],
                        metavar="SERVICE:INTENTLEDGER_NAME=VALUE",
                        help="a setting for one service's processes (tuning experiments)")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    parser.add_argument("--profile-rate", type=int,
                        help="py-spy every service during the step of this rate")
    parser.add_argument("--profile-seconds", type=float, default=20.0)
    parser.add_argument("--baselines", dest="baselines", action="store_true", default=None,
                        help="measure the baselines and the peer (default: yes, unless --quick)")
    parser.add_argument("--no-baselines", dest="baselines", action="store_false")
    args = parser.parse_args(argv)
    rates = [int(r) for r in args.rates.split(",")] if args.rates else \
        list(QUICK_RATES if args.quick else FULL_RATES)
    formats = [f.strip() for f in args.formats.split(",") if f.strip()]
    known = {"generic", "openai.chat", "openai.responses", "anthropic"}
    if not formats or set(formats) - known:
        raise SystemExit(f"--formats: choose from {sorted(known)}")
    step_s = args.step_seconds or (10.0 if args.quick else 60.0)
    return Config(
        rates=rates, step_s=step_s, grace_s=args.grace_seconds,
        drain_s=args.drain_seconds or (120.0 if args.quick else 900.0),
        warmup_s=args.warmup_seconds, calls_per_run=args.calls_per_run,
        active_runs=args.active_runs, wallets=args.wallets, formats=formats,
        max_p99_ms=args.max_p99_ms, max_backlog_s=args.max_backlog_s,
        abort_backlog_s=args.abort_backlog_s, replicas=_parse_pairs(args.replicas, "replicas"),
        env=_parse_env(args.env), out=args.out, profile_rate=args.profile_rate,
        profile_s=args.profile_seconds,
        baselines=args.baselines if args.baselines is not None else not args.quick,
        quick=args.quick, latency_rate=args.latency_rate,
        latency_s=args.latency_seconds or step_s)


def _print_summary(result: dict[str, Any]) -> None:
    print(f"\n== end-to-end, {result['cores']} cores, "
          f"{'PASSED' if result['passed'] else 'FAILED'} correctness")
    for step in result["steps"]:
        s = step["settled_ms"]
        print(f"  {step['phase']:>7} {step['rate_per_s']:>5}/s for {step['duration_s']:>5.1f} s: offered "
              f"{step['offered_per_s']:>7.1f}/s settled {step['settled_per_s']:>7.1f}/s  "
              f"p50 {s['p50']} p99 {s['p99']} max {s['max']} ms  backlog max "
              f"{step['backlog_max']}  {'sustainable' if step['sustainable'] else 'NOT sustainable'}"
              + ("" if step["sustainable"] else f" ({'; '.join(step['verdict']['reasons'])})"
                 if step["verdict"] else ""))
    print(f"  sustained {result['sustained_proposals_per_s']}/s; at "
          f"{result['latency_at_rate_per_s']}/s p50 {result['p50_ms']} ms, p99 {result['p99_ms']} ms")
    print("  cpu s / peak MB: " + ", ".join(
        f"{name} {p['cpu_s']}/{p['peak_rss_mb']}" for name, p in result["processes"].items()))
    correctness = result["correctness"]
    print(f"  retry amplification {correctness['retry_amplification']}, "
          f"states {correctness['dispatcher_states']}")
    for failure in correctness["failures"] + result["problems"]:
        print(f"  FAILED: {failure}")
    print(f"  dbos_workflows_per_s {result['dbos_workflows_per_s']}, pgbench_tps "
          f"{result['pgbench_tps']}" + (f" ({result['baselines'].get('reason')})"
                                        if result["baselines"].get("reason") else ""))


async def main(config: Config) -> int:
    for chatty in ("aiokafka", "asyncpg"):
        logging.getLogger(chatty).setLevel(logging.CRITICAL)
    settings = Settings()
    endpoints = settings.endpoints if settings.kafka_bootstrap and settings.database_url \
        else await asyncio.to_thread(infra.up, settings)
    bench = Bench(config, settings, endpoints)
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    for sig in (signal.SIGINT, signal.SIGTERM):  # stop the services on Ctrl-C too
        loop.add_signal_handler(sig, task.cancel)
    result = await bench.run()
    config.out.mkdir(parents=True, exist_ok=True)
    (config.out / "e2e.json").write_text(json.dumps(result, indent=2, default=str) + "\n")
    # The per-second samples behind the timeline plot, for anyone re-plotting or digging.
    (config.out / "e2e-timeline.json").write_text(json.dumps(
        [{k: (round(v, 3) if isinstance(v, float) else v) for k, v in sample.items()}
         for sample in bench.timeline], default=str) + "\n")
    from bench import e2e_plots  # noqa: PLC0415 (matplotlib only once there is something to plot)

    written = e2e_plots.plot_all(result, bench, config.out)
    _print_summary(result)
    print(f"  wrote {config.out / 'e2e.json'}, e2e-timeline.json and "
          f"{', '.join(p.name for p in written)}")
    return 0 if result["passed"] else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main(parse_config())))
