"""Baseline: the pipeline's floor, the proposal's path with every service's work taken out.

Four consuming processes of the project's own runtime (``skeleton_stage.py``: the intake, the
policy, the dispatcher, the wallet) forward each event down the six topics of a proposal's
path, a fifth (the projection) reads four of them, and the real relay publishes their
outboxes; the agent's produce and the result's fetch are this driver's. So a skeleton
proposal pays what the architecture asks of every proposal (five transactions of inbox
markers and outbox rows on its path and the projection's share of one, five relayed records
with their claims and marks, the fetches, the offset commits) and nothing the services add to
it: no parsing of a tool call, no signatures, no policy, no state machine, no wallet rows, no
read model's rows.

Each rate in ``rates`` is offered for ``step_s`` seconds (keyed over ``runs`` runs, as the
end-to-end benchmark's agents do), and each step reports the rate settled, the latency from
the agent's send to the driver's fetch of the last event, and the CPU per settled proposal
of each process and of all of them (``bench.e2e.meter``, from the first send until the last
proposal of the step arrived). A step is sustained when every proposal arrived within
``GRACE_S`` of the step's end and the p99 is within ``MAX_P99_MS``; the ramp stops at the
first step that is not.

Fair as a floor because it is the same runtime, drivers, durability and process layout as
the pipeline, with no work in the hops. ``bench.e2e`` sets the two side by side
(``bench/e2e/floor.py``): CPU per proposal at a rate where neither fills the machine, latency
and the rate each sustains. It measures this runtime's floor, not the architecture's in any
runtime: a leaner consumer than FastStream's, say, would lower it.

    python -m bench.baselines skeleton [--rates 10,50,100] [--step-s 20]
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import time
import uuid

import asyncpg
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient

from bench.baselines import skeleton_stage as stages
from bench.baselines._common import quantile, require_durable, scratch_outbox
from bench.e2e.meter import Meter
from intentledger.chaos.stack import Stack
from shared.config import Endpoints, Settings
from shared.messaging.admin import ensure_topics
from shared.messaging.envelope import Envelope, decode
from shared.messaging.kafka_security import client_options

GRACE_S = 10.0
MAX_P99_MS = 1000.0
WARM_UP_S = 120.0
"""How long the ready stack may take to carry its first proposal (group joins)."""
WARM_UP_PROPOSALS = 50
AGENT = "agent"
"""This driver, in the CPU figures: the agent's produce and fetch, left out of ``all`` as
``bench.e2e`` leaves its harness out of the pipeline's."""


async def run(endpoints: Endpoints, *, rates: str = "10,50,100,150,200", step_s: float = 20.0,
              runs: int = 256) -> dict:
    """Returns ``steps`` (each rate's figures), ``sustained_per_s`` (the highest rate
    sustained) and ``cpu_ms_at_sustained`` (all processes, per settled proposal, at that rate),
    with ``synchronous_commit`` and the run's ``nonce``."""
    settings = Settings()
    nonce = uuid.uuid4().hex[:8]
    schemas = [stages.schema(nonce, stage) for stage in stages.STAGES]
    conn = await asyncpg.connect(endpoints.database_url)
    try:
        synchronous_commit = await require_durable(conn)
        for name in schemas:
            await scratch_outbox(conn, name)
        await ensure_topics(endpoints.kafka_bootstrap,
                            [stages.topic(nonce, step) for step in stages.PATH])
        stack = Stack(endpoints, settings.logs_dir, "bench-skeleton")
        try:
            await _start(stack, schemas, nonce)
            meter = Meter()
            for replica in stack.replicas.values():
                assert replica.process is not None
                meter.add(replica.label, replica.process.pid, "python")
            meter.add_infrastructure(settings)
            meter.add(AGENT, os.getpid(), "python")
            async with _Traffic(endpoints.kafka_bootstrap, nonce, runs) as traffic:
                await traffic.warm_up(stack)
                steps = []
                for rate in (int(rate) for rate in rates.split(",")):
                    steps.append(await _step(traffic, meter, rate, step_s))
                    if not steps[-1]["sustained"]:
                        break
        finally:
            await stack.stop()
    finally:
        for name in schemas:
            await conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')
        await conn.close()
        await _delete_topics(endpoints.kafka_bootstrap, nonce)
    sustained = [step for step in steps if step["sustained"]]
    return {"steps": steps, "sustained_per_s": sustained[-1]["rate_per_s"] if sustained else None,
            "cpu_ms_at_sustained": sustained[-1]["cpu_ms_per_settled"]["all"] if sustained else None,
            "step_s": step_s, "runs": runs, "nonce": nonce,
            "synchronous_commit": synchronous_commit}


async def _start(stack: Stack, schemas: list[str], nonce: str) -> None:
    """The relay, draining only the skeleton's outboxes, and the stages, each ready."""
    await stack.start("relay", {"INTENTLEDGER_RELAY_SCHEMAS": json.dumps(schemas)})
    await asyncio.gather(*(stack.start(stage, {}, module=(
        "bench.baselines.skeleton_stage", "--stage", stage, "--nonce", nonce))
        for stage in stages.STAGES))


class _Traffic:
    """The agent's side: proposals produced with the durability agents use, and the last
    step's events fetched as they arrive, each timed from its send."""

    def __init__(self, bootstrap: str, nonce: str, runs: int) -> None:
        self._nonce = nonce
        self._runs = runs
        self._producer = AIOKafkaProducer(**client_options(bootstrap), acks="all",
                                          enable_idempotence=True,
                                          client_id="intentledger-bench-skeleton")
        self._consumer = AIOKafkaConsumer(stages.topic(nonce, stages.PATH[-1]),
                                          **client_options(bootstrap), enable_auto_commit=False,
                                          auto_offset_reset="earliest",
                                          group_id=f"bench-skeleton-{nonce}")
        self.sent: dict[str, float] = {}
        self.arrived: dict[str, float] = {}
        self.repeated = 0
        """Results fetched again (at-least-once delivery past the last inbox): none in a run
        without faults."""
        self._reading: asyncio.Task | None = None
        self._count = 0

    async def __aenter__(self) -> _Traffic:
        await asyncio.gather(self._producer.start(), self._consumer.start())
        self._reading = asyncio.create_task(self._read())
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._reading is not None
        self._reading.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._reading
        await asyncio.gather(self._producer.stop(), self._consumer.stop())

    async def _read(self) -> None:
        while True:
            batches = await self._consumer.getmany(timeout_ms=200)
            now = time.perf_counter()
            for records in batches.values():
                for record in records:
                    proposal = decode(record.value, record.headers).payload["proposal"]
                    if proposal in self.arrived:
                        self.repeated += 1
                    else:
                        self.arrived[proposal] = now

    async def send(self) -> str:
        proposal, run_id = str(uuid.uuid4()), f"run-{self._count % self._runs}"
        self._count += 1
        envelope = Envelope.new(event_type=stages.event_type(stages.PATH[0]), run_id=run_id,
                                producer="bench-skeleton-agent", payload={"proposal": proposal})
        self.sent[proposal] = time.perf_counter()
        await self._producer.send(
            stages.topic(self._nonce, stages.PATH[0]), envelope.value(), key=run_id.encode(),
            headers=[(name, value.encode()) for name, value in envelope.headers().items()])
        return proposal

    async def warm_up(self, stack: Stack) -> None:
        """One proposal every half second until one comes back, then ``WARM_UP_PROPOSALS`` at
        10/s: group joins, the first fetch sessions and prepared statements are behind the
        first step (the processes were ready when the stack started them)."""
        logs = stack.logs()
        deadline = time.monotonic() + WARM_UP_S
        first = await self.send()
        while first not in self.arrived:
            if time.monotonic() > deadline:
                raise RuntimeError(f"the skeleton carried no proposal in {WARM_UP_S:.0f} s; "
                                   f"its logs: {logs}")
            if exited := [r.label for r in stack.replicas.values() if not r.running]:
                raise RuntimeError(f"skeleton processes exited: {exited}; their logs: {logs}")
            await asyncio.sleep(0.5)
            await self.send()
        more = []
        for _ in range(WARM_UP_PROPOSALS):
            more.append(await self.send())
            await asyncio.sleep(0.1)
        while not all(proposal in self.arrived for proposal in more):
            if time.monotonic() > deadline:
                raise RuntimeError(f"the skeleton's warm-up did not arrive in {WARM_UP_S:.0f} s; "
                                   f"its logs: {logs}")
            await asyncio.sleep(0.05)


async def _step(traffic: _Traffic, meter: Meter, rate: int, step_s: float) -> dict:
    count = max(1, round(rate * step_s))
    before, busy_before, repeated = meter.cpu(), meter.machine_busy(), traffic.repeated
    started = time.perf_counter()
    proposals = []
    for index in range(count):
        if (wait := started + index / rate - time.perf_counter()) > 0:
            await asyncio.sleep(wait)
        proposals.append(await traffic.send())
    offered_s = time.perf_counter() - started
    deadline = started + step_s + GRACE_S
    waiting = set(proposals)
    while waiting and time.perf_counter() < deadline:
        await asyncio.sleep(0.01)
        waiting -= traffic.arrived.keys()
    after, busy_after = meter.cpu(), meter.machine_busy()
    arrived = [p for p in proposals if p in traffic.arrived]
    latencies = [(traffic.arrived[p] - traffic.sent[p]) * 1000 for p in arrived]
    last = max((traffic.arrived[p] for p in arrived), default=time.perf_counter())
    settled = len(arrived)
    cpu = {name: (after[name] - before[name]) * 1000 / max(settled, 1)
           for name in after if name in before}
    cpu["all"] = sum(value for name, value in cpu.items() if name != AGENT)
    cpu["machine"] = (busy_after - busy_before) * 1000 / max(settled, 1)
    p50, p99 = (quantile(latencies, 0.5), quantile(latencies, 0.99)) if latencies else (None, None)
    return {"rate_per_s": rate, "proposals": count, "offered_per_s": count / offered_s,
            "settled": settled, "settled_per_s": settled / max(last - started, 1e-9),
            "repeated": traffic.repeated - repeated, "p50_ms": p50, "p99_ms": p99,
            "sustained": settled == count and p99 is not None and p99 <= MAX_P99_MS,
            "cpu_ms_per_settled": {name: round(value, 3) for name, value in cpu.items()}}


async def _delete_topics(bootstrap: str, nonce: str) -> None:
    admin = AIOKafkaAdminClient(**client_options(bootstrap))
    await admin.start()
    try:
        with contextlib.suppress(Exception):
            await admin.delete_topics([stages.topic(nonce, step) for step in stages.PATH])
    finally:
        await admin.close()
