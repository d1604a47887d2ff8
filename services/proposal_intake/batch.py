"""The intake's set-wise path: a consumed batch of proposal records in a constant number of
statements, however many records and calls it holds.

It answers exactly as ``Intake.take`` would record after record, in the same order: each
record is read (identity, shape) without a table; the rate buckets are spent for all of them
at once (``rates.spend_all``); the runs the calls name are locked and the intents holding
their keys or call ids read, in one statement (``repository.runs_and_calls_named``); then
every call is decided in delivery order against that state as the earlier calls of the batch
left it (a key taken, a run's count and cost raised), by the same rules (``run_checks``,
``Outcomes.taken``); and the buckets, the new runs, the intents and the runs' counters are
written in one statement.

What no read can foresee is a concurrent transaction (another replica) taking a key, a call
id or a run between our read and our insert: the insert waits for it and comes back short.
The batch then fails as retryable (``RaceLost``): its transaction rolls back, rates and all,
and the batch is delivered again, when the read sees what the other one committed and the
calls are answered as ``take`` answers the loser of a race (duplicate, conflict, a budget
spent). Today the rate buckets already serialize one tenant's intake transactions, so this
is a safety net, not a path of the load: it costs no statement until it is needed.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from services.proposal_intake import rates, repository
from services.proposal_intake.domain import Named, intent_of
from services.proposal_intake.outcomes import Outcomes
from services.proposal_intake.run_checks import run_refusal
from services.proposal_intake.settings import IntakeSettings
from shared.contracts.intake import Intent, IntakeReason
from shared.contracts.proposals import ToolCallProposal
from shared.db.unit_of_work import UnitOfWork
from shared.errors import RetryableError
from shared.identity.delegation import Proposer
from shared.messaging.envelope import Envelope
from shared.runs import RunKey
from shared.tools import Rejection
from shared.tracing import continuing, current_traceparent

if TYPE_CHECKING:
    from services.proposal_intake.handlers import Intake, RawProposal

log = logging.getLogger(__name__)


@dataclass
class _Record:
    """One record's answers, held until its calls are decided so that they reach the outbox
    in the order the record-by-record path writes them, and the calls it carries."""

    raw: RawProposal
    traceparent: str | None
    answers: list[tuple[str, Envelope]] = field(default_factory=list)
    proposals: tuple[ToolCallProposal, ...] = ()
    proposer: Proposer | None = None

    def emit(self, topic: str, envelope: Envelope) -> None:
        self.answers.append((topic, envelope))


class RaceLost(RetryableError):
    """A concurrent transaction took a key, a call id or a run after we read them."""


async def take_batch(intake: Intake, uow: UnitOfWork, raws: list[RawProposal],
                     settings: IntakeSettings) -> None:
    records = [_read(intake, raw) for raw in raws]
    spending = [record for record in records if record.proposals]
    if spending:
        spent = await rates.spend_all(uow.connection, [
            rates.Spending(r.proposals[0].tenant_id, r.proposals[0].principal_id,
                           len(r.proposals)) for r in spending], settings)
        for record, throttled in zip(spending, spent.answers, strict=True):
            if throttled is not None:
                _outcomes(intake, record).throttled(record.proposals, throttled.message,
                                                    throttled.retry_after_s)
                record.proposals = ()
        ledger = await _take_calls(intake, uow, records)
        await ledger.write(uow.connection, spent.written_back(1))
    for record in records:
        for topic, envelope in record.answers:
            uow.emit(topic, envelope)


def _read(intake: Intake, raw: RawProposal) -> _Record:
    """The events a record causes continue the trace its agent sent (or a new one)."""
    with continuing(raw.traceparent, "agent.proposals process"):
        record = _Record(raw, current_traceparent())
    if (read := intake.read(_outcomes(intake, record), raw)) is not None:
        record.proposals, record.proposer = read
    return record


def _outcomes(intake: Intake, record: _Record) -> Outcomes:
    return intake.outcomes(record, record.raw, record.traceparent, record.proposer)


async def _take_calls(intake: Intake, uow: UnitOfWork, records: list[_Record]) -> _Ledger:
    named: list[tuple[_Record, ToolCallProposal, Named]] = []
    for record in records:
        for proposal in record.proposals:
            try:
                named.append((record, proposal, intake.name(proposal)))
            except Rejection as rejection:
                _outcomes(intake, record).rejected(proposal, rejection.code, rejection.message)
    if not named:
        return _Ledger({}, {}, set())
    locked, taken = await repository.runs_and_calls_named(
        uow.connection, [RunKey.of(p) for _, p, _ in named],
        [n.operation_key for _, _, n in named],
        [(RunKey.of(p), p.provider_call_id) for _, p, _ in named])
    runs = {RunKey(row["tenant_id"], row["run_id"]): row for row in locked}
    ledger = _Ledger(runs, {row["operation_key"]: row for row in taken},
                     {(RunKey(row["tenant_id"], row["run_id"]), row["provider_call_id"])
                      for row in taken})
    for record, proposal, name in named:
        outcomes = _outcomes(intake, record)
        with outcomes.refusing_failures(proposal, name):  # ``decide`` changes nothing if it raises
            ledger.decide(intake, outcomes, proposal, name, record.proposer)
    return ledger


class _Ledger:
    """The batch's view of the runs and intents it touches, changed call by call as
    ``Intake._record`` changes the tables, then written at once."""

    def __init__(self, runs: dict[RunKey, dict], by_key: dict, call_ids: set) -> None:
        self._runs = runs
        self._by_key = by_key
        self._call_ids = call_ids
        self._created: list[RunKey] = []
        self._intents: list[Intent] = []
        self._added: dict[RunKey, tuple[int, int]] = {}

    def decide(self, intake: Intake, outcomes: Outcomes, proposal: ToolCallProposal,
               named: Named, proposer: Proposer | None) -> None:
        if (existing := self._by_key.get(named.operation_key)) is not None:
            outcomes.taken(proposal, named, existing)
            return
        key = RunKey.of(proposal)
        run, limits = self._runs.get(key), intake.run_limits_of(proposal)
        cost = named.tool.cost_of(named.canonical.value)
        person = proposer.person_id if proposer else None
        if (refusal := run_refusal(run, limits, proposal, cost, person)) is not None:
            outcomes.rejected(proposal, *refusal, named)
            return
        if run is None:  # the run starts with an accepted call, never with a refused one
            run = repository.new_run(proposal, limits, person)
            if (refusal := run_refusal(run, limits, proposal, cost, person)) is not None:
                self._create(key, run)
                outcomes.rejected(proposal, *refusal, named)
                return
        intent = intent_of(proposal, named, run["deadline_at"], run["max_attempts"], proposer)
        if key not in self._runs:
            self._create(key, run)
        if (key, proposal.provider_call_id) in self._call_ids:
            outcomes.rejected(proposal, IntakeReason.PROVIDER_CALL_ID_REUSED,
                              "this provider call id already names another intent in this run",
                              named)
            return
        spent = cost[0] if cost else 0
        self._by_key[intent.operation_key] = {
            "logical_call_id": intent.logical_call_id, "arguments_hash": intent.arguments_hash,
            "state": "VALIDATED", "run_id": intent.run_id, "principal_id": intent.principal_id,
            "person_id": intent.person_id, "person_recorded": True}
        self._call_ids.add((key, proposal.provider_call_id))
        run["call_count"] += 1
        run["cost_spent_minor"] += spent
        calls, total = self._added.get(key, (0, 0))
        self._added[key] = (calls + 1, total + spent)
        self._intents.append(intent)
        outcomes.accepted(proposal, intent)

    def _create(self, key: RunKey, run: dict) -> None:
        self._runs[key] = run
        self._created.append(key)

    async def write(self, conn, buckets: tuple[str, list]) -> None:
        """One statement with the rate ``buckets``; a new run starts with its counters as the
        batch left them. Short inserts mean another transaction got there first."""
        created = set(self._created)
        inserted = await repository.record_batch(
            conn, [self._runs[key] for key in self._created], self._intents,
            {key: added for key, added in self._added.items() if key not in created}, buckets)
        if inserted != (len(self._created), len(self._intents)):
            raise RaceLost("a concurrent intake transaction took a run or key of this batch")
