"""Running one fault protocol against real processes, real Kafka and real PostgreSQL.

The order is fixed: set the downstreams up, start every service with its faults armed, publish
raw records, send the proposals turn by turn (each waits for the intake's answer), let the timed
faults happen, wait for quiescence, measure, judge. A scenario passes only if every fault fired,
the stack became quiet, no service died unasked, and every assertion holds.
"""

from __future__ import annotations

import asyncio
import random
import secrets
import time
import uuid
from dataclasses import asdict
from pathlib import Path

from intentledger.chaos import facts as measured
from intentledger.chaos import timed
from intentledger.chaos.assertions import Verdict, evaluate, final_facts
from intentledger.chaos.environment import service_env
from intentledger.chaos.positions import Positions
from intentledger.chaos.quiescence import MOVING, has_reached, wait_quiet
from intentledger.chaos.report import FaultRecord, Report
from intentledger.chaos.stack import ServiceProcess
from intentledger.chaos.stack import Stack
from intentledger.chaos.signers import scenario_identities
from shared.identity.local import DISPATCHER
from intentledger.chaos.submit import Answered, Sent, publish_raw, send_turn, turns
from services.projection.replay import replay
from downstreams.wallet.repository import open_wallet
from downstreams.warehouse.handlers import stock_sku
from shared import faults as fault_points
from shared.config import Endpoints, Settings
from shared.contracts.fault_protocol import FaultProtocol, Inject, Timed, Trigger, substitute
from shared.db.pool import open_pool
from shared.topology import CONSUMER_GROUPS

SERVICES = ("relay", "proposal-intake", "policy", "dispatcher", "projection", "wallet", "warehouse")
"""The five services and both reference downstreams; a team's own downstream runs on its own."""


class Scenario:
    def __init__(self, path: Path, protocol: FaultProtocol, endpoints: Endpoints,
                 settings: Settings) -> None:
        self.path, self.protocol, self.endpoints = path, protocol, endpoints
        self.nonce = f"{protocol.seed}-{secrets.token_hex(3)}"
        seeded = random.Random(protocol.seed)
        self.jitter = {f.id: seeded.uniform(0, f.when.jitter_s) if f.when.jitter_s else 0.0
                       for f in protocol.faults if not isinstance(f, Inject)}
        self.stack = Stack(endpoints, settings.logs_dir, protocol.name)
        self.identities = scenario_identities(protocol, settings.home / "chaos" / protocol.name
                                              / "identity")
        self.positions = Positions(endpoints.kafka_bootstrap)
        self.report = Report(protocol.name, str(path), protocol.guards, protocol.seed, self.nonce)
        self.records = {f.id: FaultRecord(f.id, f.kind) for f in protocol.faults}
        self.report.faults = list(self.records.values())
        self.sent: dict[str, Sent] = {}
        self.snapshots: dict[str, measured.Facts] = {}
        self.answered = asyncio.Event()
        self.watchers: list[asyncio.Task] = []
        self.timed: list[asyncio.Task] = []
        self.over = {f.id: asyncio.Event() for f in protocol.faults}
        """Set when a timed fault has been applied and undone."""
        self.stopping = False
        self.began = time.monotonic()
        self.deadline = self.began + protocol.time_limit_s
        self.run_ids = {p.run: f"chaos-{protocol.name}-{p.run}-{self.nonce}"
                        for p in protocol.proposals}
        self.report.run_ids = self.run_ids
        self.wallets = {w.id: substitute(w.id, self.nonce) for w in protocol.setup.wallets}
        self.skus = {s.sku: substitute(s.sku, self.nonce) for s in protocol.setup.stock}
        self.proposals = [p.model_copy(update={
            "arguments": substitute(p.arguments, self.nonce),
            "operation_key": substitute(p.operation_key, self.nonce)}) for p in protocol.proposals]

    # -- the scenario, start to end ------------------------------------------------------------

    async def run(self) -> Report:
        self.pool = await open_pool(self.endpoints.database_url, application_name="intentledger-chaos")
        try:
            await self.positions.mark_start()
            self.started_at = await self.pool.fetchval("SELECT now()")
            await self._set_up()
            await self._look_for_leftovers()
            await asyncio.gather(*(self.stack.start(s, self.env(s)) for s in SERVICES))
            for replica in list(self.stack.replicas.values()):
                self.supervise(replica)
            self.timed = [asyncio.create_task(self._timed(f)) for f in self.protocol.faults
                          if not isinstance(f, Inject)]
            placements = await publish_raw(self.endpoints.kafka_bootstrap, [
                r.model_copy(update={"value": substitute(r.value, self.nonce)})
                for r in self.protocol.raw_records])
            await self._propose()
            self.answered.set()
            await self._until_deadline(asyncio.gather(*self.timed), "timed faults")
            quiet, last = await wait_quiet(
                self.pool, self.positions, self._groups(), list(self.run_ids.values()),
                [s.logical_call_id for s in self.sent.values()
                 if s.outcome.status == "accepted"], self.deadline)
            self.report.quiescence = f"{'quiet' if quiet else 'NOT QUIET'}: {last}"
            if not quiet:
                self.report.problems.append(f"no quiescence within time_limit_s: {last}")
            await self._judge(list(placements.values()))
        except Exception as error:  # the report says what went wrong; the next scenario runs
            self.report.problems.append(f"runner error: {type(error).__name__}: {error}")
        finally:
            self.stopping = True
            for task in self.timed:  # a fault still waiting or holding an outage ends now
                task.cancel()
            await asyncio.gather(*self.timed, return_exceptions=True)
            await self.stack.stop()
            for watcher in self.watchers:
                watcher.cancel()
            await self.pool.close()
            self.report.elapsed_s = round(time.monotonic() - self.began, 1)
            self.report.logs = self.stack.logs()
        return self.report

    async def _set_up(self) -> None:
        for wallet in self.protocol.setup.wallets:
            if not await open_wallet(self.pool, self.wallets[wallet.id], wallet.currency,
                                     wallet.balance_minor):
                raise RuntimeError(f"wallet {self.wallets[wallet.id]} exists: use ${{nonce}} in its id")
        for stock in self.protocol.setup.stock:
            if not await stock_sku(self.pool, self.skus[stock.sku], stock.available):
                raise RuntimeError(f"SKU {stock.sku} exists: use ${{nonce}} in it")

    async def _look_for_leftovers(self) -> None:
        """Calls an earlier scenario left in flight (it failed, or was interrupted) are stepped by
        this scenario's dispatcher and count towards its fault points' hits: said in the report,
        since it can explain a failure."""
        leftovers = await self.pool.fetchval(
            "SELECT count(*) FROM dispatcher.calls WHERE state = ANY($1::text[]) "
            "AND run_id LIKE 'chaos-%'", list(MOVING))
        if leftovers:
            self.report.warnings.append(f"{leftovers} calls of earlier scenarios were in flight at "
                                        "the start; this scenario's dispatcher steps them too")

    async def _propose(self) -> None:
        for turn in turns(self.proposals):
            if turn[0].after:
                await self._reached(turn[0].after.call, turn[0].after.state,
                                    turn[0].after.attempts, f"proposal {turn[0].name}")
            if turn[0].after_fault:
                await self._until_deadline(self.over[turn[0].after_fault].wait(),
                                           f"proposal {turn[0].name}'s wait for its fault")
            timeout = max(self.deadline - time.monotonic(), 1.0)
            for sent in await send_turn(self.endpoints.kafka_bootstrap, self.run_ids[turn[0].run],
                                        turn, timeout, self.identities):
                self.sent[sent.proposal.name] = sent
                if sent.outcome.status == "pending":
                    self.report.problems.append(f"proposal {sent.proposal.name} got no answer "
                                                "from the intake")

    async def _judge(self, placements: list[tuple[str, int, int]]) -> None:
        subjects = self._subjects(placements)
        assertions = [a.model_copy(update={"value": substitute(a.value, self.nonce)})
                      for a in self.protocol.assertions]
        final = await final_facts(lambda: self._measure(subjects), assertions, self.snapshots,
                                  self.deadline)
        verdict = await replay(self.pool, list(self.run_ids.values()))
        final.scenario["projection_replay_agrees"] = verdict.agrees
        final.scenario["replay_difference"] = verdict.difference
        self.report.facts = asdict(final)
        self.report.verdicts = [evaluate(a, final, self.snapshots) for a in assertions]
        unexpected = [name for name in final.scenario["unsettled"]
                      if name not in self.protocol.allow_unsettled]
        self.report.verdicts.append(Verdict(
            "calls left UNKNOWN, RECONCILING, MANUAL_REVIEW or in flight", f"only "
            f"{self.protocol.allow_unsettled}", final.scenario["unsettled"], not unexpected,
            "nothing is left unknown unless the protocol expects it"))
        self.report.verdicts.append(Verdict(
            "dead letters and parked outbox rows of the scenario's runs", "== []",
            final.scenario["lost_records"], not final.scenario["lost_records"],
            "nothing acknowledged is set aside: a duplicate refused by a constraint or a row the "
            "relay could not publish would be a silent loss"))
        for record in self.records.values():
            self._confirm_fired(record)

    # -- faults -------------------------------------------------------------------------------

    def _inject_rules(self, service: str) -> list[Inject]:
        return [f for f in self.protocol.faults if isinstance(f, Inject) and f.service == service]

    def supervise(self, replica: ServiceProcess) -> None:
        self.watchers.append(asyncio.create_task(self._supervise(replica)))

    async def _supervise(self, replica: ServiceProcess) -> None:
        """Watch one replica like an orchestrator: an injected exit is recorded (facts
        snapshotted) and restarted; any other death is a problem, and restarted too."""
        while not self.stopping:
            status = await self.stack.wait_exit(replica)
            if self.stopping or replica.held_down:
                if replica.held_down:
                    await self._wait_released(replica)
                    continue
                return
            fired = [rule for rule in self._inject_rules(replica.service)
                     if rule.action == "exit" and self.records[rule.id].fired_at_s is None
                     and self._fired_in_log(replica, rule)]
            if status == fault_points.EXIT_CODE and fired:
                for rule in fired:
                    await self.fired(rule.id, f"{replica.label} exited at {rule.point}")
                if not all(rule.restart for rule in fired):
                    return
            else:
                self.report.problems.append(f"{replica.label} died unasked (exit {status}); "
                                            f"see {replica.log_path}")
            await self.stack.launch(replica, self.env(replica.service, replica))

    async def _wait_released(self, replica: ServiceProcess) -> None:
        while replica.held_down and not self.stopping:
            await asyncio.sleep(0.05)

    async def _timed(self, fault: Timed) -> None:
        await self._trigger(fault.when, fault.id)
        await asyncio.sleep(fault.when.delay_s + self.jitter[fault.id])
        await timed.apply(self, fault)
        self.over[fault.id].set()

    async def _trigger(self, when: Trigger, fault_id: str) -> None:
        if when.call is None:
            if when.moment == "after_proposals":
                await self.answered.wait()
            return
        await self._reached(when.call, when.state, when.attempts, f"fault {fault_id}")

    async def _reached(self, call: str, state: str | None, attempts: int | None, waiting: str
                       ) -> None:
        """Until ``call`` is in ``state`` (or a later one) and has started ``attempts``."""
        while True:
            sent = self.sent.get(call)
            if sent is not None and sent.logical_call_id is not None and await has_reached(
                    self.pool, sent.logical_call_id, state, attempts):
                return
            if time.monotonic() > self.deadline:
                raise RuntimeError(f"{waiting} waited for {call} in vain")
            await asyncio.sleep(0.02)

    async def answered_call(self, call: str, waiting: str) -> uuid.UUID:
        """The logical call id the intake answered ``call``'s proposal with."""
        while (sent := self.sent.get(call)) is None or sent.logical_call_id is None:
            if time.monotonic() > self.deadline:
                raise RuntimeError(f"{waiting} waited for {call}'s answer in vain")
            await asyncio.sleep(0.02)
        return uuid.UUID(sent.logical_call_id)

    async def fired(self, fault_id: str, detail: str) -> None:
        """Fault ``fault_id`` did what ``detail`` says, now: the facts are snapshotted."""
        record = self.records[fault_id]
        record.fired_at_s, record.detail = self.now(), detail
        self.snapshots[fault_id] = await measured.measure(self.pool, self._subjects([]))

    def _confirm_fired(self, record: FaultRecord) -> None:
        fault = next(f for f in self.protocol.faults if f.id == record.id)
        if isinstance(fault, Inject) and fault.action != "exit" and record.fired_at_s is None:
            hits = sum(self._fired_in_log(r, fault) for r in self.stack.replicas.values()
                       if r.service == fault.service)
            if hits:
                record.fired_at_s = -1.0  # when is not recorded, only that it happened
                record.detail = f"{fault.point} -> {fault.action} ({hits} processes)"
        if record.fired_at_s is None:
            self.report.problems.append(f"fault {record.id} never fired: the scenario did not "
                                        "test what it says")

    @staticmethod
    def _fired_in_log(replica: ServiceProcess, rule: Inject) -> bool:
        return replica.injected(rule.point, rule.action) > 0

    def _fault_hits(self) -> dict[str, int]:
        """How often each injected fault fired, over every process of its service: with ``hit``
        null, the number of times the code passed the point (e.g. requests a wallet received)."""
        return {rule.id: sum(r.injected(rule.point, rule.action)
                             for r in self.stack.replicas.values() if r.service == rule.service)
                for rule in self.protocol.faults if isinstance(rule, Inject)}

    # -- configuration ------------------------------------------------------------------------

    def _groups(self) -> list[str]:
        return sorted({group for service, _ in self.stack.replicas
                       for group in CONSUMER_GROUPS.get(service, ())})

    def env(self, service: str, replica: ServiceProcess | None = None, *, armed: bool = True
             ) -> dict[str, str]:
        """The scenario's settings for ``service`` with the fault rules not yet fired; only
        replica 1 of a service carries injected faults (a started replica is never armed)."""
        rules = [rule for rule in self._inject_rules(service)
                 if armed and (replica is None or replica.number == 1)
                 and self.records[rule.id].fired_at_s is None
                 and not (replica and self._fired_in_log(replica, rule))]
        return service_env(self.protocol, self.path, service, rules,
                           self.identities.principals_file,
                           self.identities.key_file(DISPATCHER.principal_id))

    def _subjects(self, placements: list[tuple[str, int, int]]) -> measured.Subjects:
        sent = {p.name: self.sent.get(p.name) or Sent(p, self.run_ids[p.run], Answered(
            p.call_id or p.name, "pending")) for p in self.proposals}
        tenants: dict[str, set[str]] = {}
        for proposal in self.proposals:
            tenants.setdefault(proposal.run, set()).add(proposal.tenant)
        return measured.Subjects(sent, self.run_ids,
                                 {run: tuple(sorted(named)) for run, named in tenants.items()},
                                 self.wallets, self.skus,
                                 measured.BUILT_IN_COUNTERS | dict(self.protocol.effect_counters),
                                 self.started_at, placements)

    async def _measure(self, subjects: measured.Subjects) -> measured.Facts:
        told = await measured.told_the_agent(self.positions)
        final = await measured.measure(self.pool, subjects, settled=told)
        final.faults = self._fault_hits()
        return final

    async def _until_deadline(self, awaitable, what: str) -> None:
        try:
            await asyncio.wait_for(awaitable, max(self.deadline - time.monotonic(), 0.1))
        except TimeoutError:
            self.report.problems.append(f"{what} did not finish within time_limit_s")

    def now(self) -> float:
        """Seconds since the scenario began."""
        return round(time.monotonic() - self.began, 2)
