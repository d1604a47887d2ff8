"""The reducer: call and run rows as a pure function of the *set* of ledger events.

Kafka orders events per partition of one topic only: a run's intake, policy and dispatcher
events interleave arbitrarily, and any of them may be redelivered. So every column has a rule
that gives the same value whatever the order (a join: commutative, associative, idempotent):

- state, its rank ``(stage, version, event_id)``, reason, policy version, worker, fence and
  ``updated_at`` come from the highest-ranked event seen: an event applies only if it outranks
  the row (compare-and-swap on the composite version); a lower or equal one is STALE and moves
  nothing — the row never goes backwards;
- identity (run, tenant, principal, provider call id, operation key, tool, arguments hash, the
  call compensated) never changes: every event that carries it fills what is missing, stale or
  not, and one that contradicts the row is ILLEGAL;
- evidence only grows: ``attempts`` is the highest attempt number seen, ``unknown_since`` the
  latest time the call was marked UNKNOWN (kept after it leaves UNKNOWN, as evidence),
  ``receipt_id`` and ``result`` those of the call's one success.

Every value comes from event content (``occurred_at``), never from the processing clock, so a
replay rebuilds the same rows. Change any rule here and bump ``REDUCER_VERSION``.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass, fields, replace
from datetime import datetime
from typing import Any

from services.projection.facts import CallFact, RunFact
from shared.messaging.versioning import Advance

REDUCER_VERSION = "projection.v2"
"""v2: the same rows as v1; the run hash takes its calls as a sum of per-call digests
(``hashing.py``), so that it can be updated one call at a time."""

SETTLED = frozenset({"SUCCEEDED", "FAILED", "MANUAL_REVIEW", "DENIED", "EXPIRED", "COMPENSATED",
                     "COMPENSATION_FAILED"})
"""Nothing further will happen to the call without a person (DENIED includes the policy's)."""
NEEDS_ATTENTION = frozenset({"UNKNOWN", "MANUAL_REVIEW", "COMPENSATION_FAILED"})
REFUSED = frozenset({"DENIED", "EXPIRED", "FAILED"})
IDENTITY = ("run_id", "tenant_id", "principal_id", "provider_call_id", "operation_key",
            "tool_name", "tool_version", "arguments_hash", "compensates")
RANKED = ("state", "stage", "version", "reason", "policy_version", "worker_id", "fence")


@dataclass(frozen=True)
class CallRow:
    logical_call_id: uuid.UUID
    run_id: str
    tenant_id: str
    principal_id: str
    provider_call_id: str | None
    operation_key: str | None
    tool_name: str | None
    tool_version: str | None
    arguments_hash: str | None
    state: str
    version: int
    reason: str | None
    policy_version: str | None
    worker_id: str | None
    fence: int | None
    attempts: int
    receipt_id: str | None
    result: dict[str, Any] | None
    compensates: uuid.UUID | None
    unknown_since: datetime | None
    updated_at: datetime
    stage: int
    last_event_id: uuid.UUID

    @property
    def rank(self) -> tuple[int, int, uuid.UUID]:
        return self.stage, self.version, self.last_event_id


@dataclass(frozen=True)
class RunRow:
    run_id: str
    tenant_id: str
    principal_id: str
    status: str
    calls: int
    stop_reason: str | None
    updated_at: datetime
    rejected_proposals: int


CALL_COLUMNS = tuple(field.name for field in fields(CallRow))
RUN_COLUMNS = tuple(field.name for field in fields(RunRow))


def columns(row: CallRow | RunRow) -> dict[str, Any]:
    """A row's values by column name (shallow: ``dataclasses.asdict`` deep-copies results)."""
    return {name: getattr(row, name) for name in (CALL_COLUMNS if isinstance(row, CallRow)
                                                   else RUN_COLUMNS)}


def apply(row: CallRow | None, fact: CallFact) -> tuple[CallRow | None, Advance]:
    """The call's row after ``fact``; ILLEGAL leaves it as it was."""
    if row is None:
        return _new(fact), Advance.APPLIED
    if any(_contradicts(getattr(row, name), getattr(fact, name)) for name in IDENTITY):
        return row, Advance.ILLEGAL
    merged = replace(
        row,
        **{name: getattr(fact, name) for name in IDENTITY if getattr(row, name) is None},
        attempts=max(row.attempts, fact.attempt or 0),
        unknown_since=_latest(row.unknown_since, _marked_unknown_at(fact)),
        receipt_id=row.receipt_id if row.receipt_id is not None else fact.receipt_id,
        result=row.result if row.result is not None else fact.result)
    if fact.rank <= row.rank:
        return merged, Advance.STALE
    return replace(merged, **{name: getattr(fact, name) for name in RANKED},
                   last_event_id=fact.event_id, updated_at=fact.occurred_at), Advance.APPLIED


def derive_run(run_id: str, calls: Iterable[CallRow], facts: Iterable[RunFact]) -> RunRow | None:
    """A run exists once it has a call (the intake creates runs with their first accepted call)."""
    calls = sorted(calls, key=lambda call: call.logical_call_id)
    facts = sorted(facts, key=lambda fact: (fact.occurred_at, fact.event_id))
    if not calls:
        return None
    states = {call.state for call in calls}
    aborts = [fact for fact in facts if fact.kind == "aborted"]
    return RunRow(
        run_id=run_id, tenant_id=calls[0].tenant_id, principal_id=calls[0].principal_id,
        status=run_status(bool(states & NEEDS_ATTENTION), bool(aborts), bool(states - SETTLED)),
        calls=len(calls),
        stop_reason=aborts[0].reason if aborts else (
            refusal.reason if (refusal := latest_refusal(calls, facts)) else None),
        updated_at=max([call.updated_at for call in calls]
                       + [fact.occurred_at for fact in facts]),
        rejected_proposals=sum(1 for fact in facts if fact.kind == "rejected"))


def run_status(needs_attention: bool, aborted: bool, unsettled: bool) -> str:
    if needs_attention:
        return "needs_attention"
    if aborted:
        return "aborted"
    if unsettled:
        return "running"
    return "completed"  # never while a call is UNKNOWN or waits for a person (docs/design.md §4)


@dataclass(frozen=True)
class Refusal:
    """A refused call (its ``updated_at``, ``last_event_id``, ``reason``) or a refused proposal
    (``occurred_at``, ``event_id``, ``reason``): the latest names a run's stop reason."""

    at: datetime
    event_id: uuid.UUID
    reason: str | None

    @property
    def key(self) -> tuple[datetime, uuid.UUID]:
        return self.at, self.event_id


def refusal_of(call: CallRow | None) -> Refusal | None:
    if call is None or call.state not in REFUSED:
        return None
    return Refusal(call.updated_at, call.last_event_id, call.reason)


def latest_refusal(calls: Iterable[CallRow], facts: Iterable[RunFact]) -> Refusal | None:
    refusals = [refusal for refusal in map(refusal_of, calls) if refusal is not None]
    refusals += [Refusal(fact.occurred_at, fact.event_id, fact.reason) for fact in facts
                 if fact.kind == "rejected"]
    return max(refusals, key=lambda refusal: refusal.key, default=None)


def _new(fact: CallFact) -> CallRow:
    return CallRow(
        **{name: getattr(fact, name) for name in (*IDENTITY, *RANKED, "logical_call_id",
                                                  "receipt_id", "result")},
        attempts=fact.attempt or 0, unknown_since=_marked_unknown_at(fact),
        updated_at=fact.occurred_at, last_event_id=fact.event_id)


def _marked_unknown_at(fact: CallFact) -> datetime | None:
    return fact.occurred_at if fact.state == "UNKNOWN" else None


def _latest(a: datetime | None, b: datetime | None) -> datetime | None:
    return max(filter(None, (a, b)), default=None)


def _contradicts(current: object, claimed: object) -> bool:
    return current is not None and claimed is not None and current != claimed
