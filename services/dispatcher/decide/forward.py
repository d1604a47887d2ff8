"""Phase forward: from an authorized call to a sent attempt, and what its answer means.

The intent is recorded before any attempt, and an attempt before it is sent: for a Kafka tool in
the same transaction (the request is an outbox row), for an HTTP tool in two. No answer by the
attempt deadline — or an HTTP response lost with its worker — is UNKNOWN, never FAILED:
nobody knows yet, and reconciliation starts only after every earlier attempt's deadline.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta
from typing import Literal

from services.dispatcher import metrics
from services.dispatcher.authority import Refusal
from services.dispatcher.capacity import CAPACITY_RECHECK_S
from services.dispatcher.decide import settle
from services.dispatcher.decide.actions import (Action, Count, CrashPoint, ExtendWork,
                                                FinishAttempt, Move, Postpone, StartAttempt,
                                                WaitForCapacity)
from services.dispatcher.decide.situation import Situation
from services.dispatcher.repository import Attempt
from services.dispatcher.retry_budget import attempt_deadline, attempts_exhausted
from shared.contracts.dispatch import (DISPATCH_INTENT_RECORDED, TOOL_OUTCOME_MARKED_UNKNOWN,
                                       CallState as S, DispatchReason)

DEADLINE_PASSED = "deadline_passed"
"""A downstream's refusal of a request that arrived after its deadline, key left unsettled."""


def record_intent(step: Situation) -> list[Action]:
    """Invariant 1: the intent is durable before anything can be sent."""
    call = step.call
    if (call.compensates is not None and call.capability is None
            and call.policy_refusal is None and step.now < call.deadline_at):
        return [Postpone(call.deadline_at)]  # the policy has not answered
    if refusal := step.refusal():
        return settle.refuse(step, refusal)
    recorded = [Move(S.INTENT_RECORDED, DISPATCH_INTENT_RECORDED, next_action_at=step.now),
                Count(metrics.INTENT, call.tool_name)]
    if step.tool.adapter == "http":
        # An HTTP request leaves the process the moment it is made: its intent commits first.
        return [*recorded, CrashPoint("intent_recorded")]
    # A Kafka request is an outbox row, published only once its transaction has committed: the
    # intent and its first send can be one transaction, and still nothing is dispatched before
    # the intent is durable.
    return [*recorded, *send(replace(step, call=replace(call, state=S.INTENT_RECORDED),
                                     authorized=True), to=S.DISPATCHING)]


def send(step: Situation, *, to: S) -> list[Action]:
    """A send attempt under the operation key, if authority, budgets, time, the dependency's
    breaker and the tool's slots in flight all allow it now."""
    call, tool, now = step.call, step.tool, step.now
    if refusal := step.refusal() or budget_refusal(step):
        if to == S.RECONCILING:
            return settle.manual(step, DispatchReason.NO_RECONCILIATION_PATH,
                                 f"the outcome is unknown and a replay is not allowed: "
                                 f"{refusal.detail}")
        if call.state == S.RECONCILING or step.attempts:
            # Every earlier attempt is confirmed not applied; none may follow.
            return settle.fail(step, step.latest, refusal.reason, refusal.detail)
        return settle.refuse(step, refusal)
    deadline = attempt_deadline(now, tool.retry.attempt_timeout_seconds, call.deadline_at,
                                step.settings.recovery_reserve_s)
    if (until := step.judges.breakers.closed_at(step.dependency, now)) is not None:
        return [Postpone(min(until, deadline))]
    if not step.capacity.admits(call.tool_name, call.capacity):
        return [WaitForCapacity(in_line_until(step))]
    return start_attempt(step, "send", deadline, to)


def in_line_until(step: Situation) -> datetime:
    """When a call in line for a slot is looked at again if no slot has come: after the
    recheck interval, or just as too little time is left for an attempt (``budget_refusal``
    then expires it)."""
    settings = step.settings
    expires = step.call.deadline_at - timedelta(seconds=settings.recovery_reserve_s
                                                + settings.min_attempt_s - 0.001)
    return min(step.now + timedelta(seconds=CAPACITY_RECHECK_S), expires)


def budget_refusal(step: Situation) -> Refusal | None:
    call, run, tool, settings = step.call, step.run, step.tool, step.settings
    sent = sum(1 for attempt in step.attempts if attempt.kind == "send")
    if attempts_exhausted(sent, tool.retry.max_attempts):
        return Refusal(S.DENIED, DispatchReason.CALL_ATTEMPT_BUDGET_EXHAUSTED,
                       f"{sent} of the tool's {tool.retry.max_attempts} attempts used")
    if call.compensates is None and run.attempts_used >= run.max_attempts:
        return Refusal(S.DENIED, DispatchReason.RUN_ATTEMPT_BUDGET_EXHAUSTED,
                       f"the run has used its {run.max_attempts} attempts")
    remaining = (call.deadline_at - timedelta(seconds=settings.recovery_reserve_s)
                 - step.now).total_seconds()
    if remaining < settings.min_attempt_s:
        return Refusal(S.EXPIRED, DispatchReason.RUN_DEADLINE_PASSED,
                       f"{max(remaining, 0):.1f} s left before the recovery reserve")
    return None


def start_attempt(step: Situation, kind: Literal["send", "lookup"], deadline: datetime,
                  to: S) -> list[Action]:
    actions: list[Action] = [
        StartAttempt(kind, deadline, to),
        Count(metrics.ATTEMPT_SENT if kind == "send" else metrics.ATTEMPT_LOOKUP,
              step.call.tool_name)]
    if kind == "send" and step.tool.requires_approval and not (step.call.capability or {}).get(
            "approvals"):
        actions.append(Count(metrics.IRREVERSIBLE_UNAPPROVED, step.call.tool_name))
    return actions


def after_attempt(step: Situation) -> list[Action]:
    latest = step.latest
    if latest.status is None:
        finished = unanswerable(step, latest)
        if isinstance(finished, Postpone):
            return [finished]
        return [finished, *mark_unknown(with_finished(step, finished))]
    reason = (latest.receipt or {}).get("reason")
    if latest.status == "applied":
        return settle.succeed(step, latest, reconciled=False)
    if latest.status == "rejected" and reason == DEADLINE_PASSED:
        # Delivered after its own deadline and refused unsettled: nothing was applied, and
        # the run may still have time for another attempt under the same key.
        return send(step, to=S.DISPATCHING)
    if latest.status in ("rejected", "refused"):
        return settle.fail(step, latest, DispatchReason.REJECTED_BY_TOOL,
                           f"{latest.detail}: {reason}")
    if latest.status == "transient":  # confirmed not applied; its backoff has passed
        return send(step, to=S.DISPATCHING)
    return mark_unknown(step)  # unknown, stale, or an answer that does not fit a send


def unanswerable(step: Situation, latest: Attempt) -> FinishAttempt | Postpone:
    """The unanswered attempt recorded as unknown once its answer can no longer come: its
    deadline passed, or it was an HTTP call whose worker lost the run (the response lived
    only in that worker's memory). Otherwise wait for its deadline."""
    lost = step.tool.adapter == "http" and latest.fence < step.fence
    if not lost and step.now < latest.deadline_at:
        return Postpone(latest.deadline_at)
    step.judges.breakers.failed(step.dependency, step.now)
    return FinishAttempt(latest.attempt, "unknown",
                         "its worker lost the run before recording the response" if lost
                         else "no answer by the attempt deadline")


def with_finished(step: Situation, finished: FinishAttempt) -> Situation:
    latest = replace(step.latest, status=finished.status, detail=finished.detail,
                     finished_at=step.now)
    return replace(step, attempts=(*step.attempts[:-1], latest))


def mark_unknown(step: Situation) -> list[Action]:
    """Never FAILED after a lost response: nobody knows yet, and the record says so.

    Reconciliation starts only once every earlier attempt's deadline has passed, plus a
    grace for the downstream's clock, so that no request still in flight can land after a
    lookup said "not found". The run's work is extended by the reconciliation window: its
    owner keeps a lease to finish recovery even past the run deadline."""
    settings, latest = step.settings, step.latest
    last_deadline = max(attempt.deadline_at for attempt in step.attempts)
    not_before = last_deadline + timedelta(seconds=settings.clock_skew_grace_s)
    return [ExtendWork(step.now + timedelta(seconds=settings.reconciliation_window_s)),
            Move(S.UNKNOWN, TOOL_OUTCOME_MARKED_UNKNOWN, next_action_at=max(step.now, not_before),
                 attempt=latest, detail=latest.detail),
            Count(metrics.OUTCOME_UNKNOWN, step.call.tool_name)]
