"""Phase settle: the endings of a call — succeeded, failed, refused, or handed to a person.

FAILED only on evidence that nothing was applied; a result that breaks the tool's schema is a
person's to judge, since the effect exists but what it says cannot be trusted.
"""

from __future__ import annotations

from services.dispatcher import metrics
from services.dispatcher.authority import Refusal
from services.dispatcher.decide import compensate
from services.dispatcher.decide.actions import Action, CommitEffect, Count, Move, Postpone
from services.dispatcher.decide.situation import Situation
from services.dispatcher.repository import Attempt
from services.dispatcher.results import parsed_result
from shared.contracts.dispatch import (DISPATCH_REFUSED, MANUAL_REVIEW_REQUIRED,
                                       TOOL_EFFECT_RECONCILED, TOOL_RESULT_RECORDED,
                                       CallState as S, DispatchReason)

RUN_STOPPED = frozenset({DispatchReason.RUN_ABORTED, DispatchReason.RUN_CANCELLED})
"""Refusals because the run has stopped already: they do not stop it again."""


def succeed(step: Situation, attempt: Attempt, *, reconciled: bool) -> list[Action]:
    step.judges.breakers.succeeded(step.dependency)
    receipt = attempt.receipt or {}
    result, problem = parsed_result(step.tool, receipt.get("result"))
    if problem is not None:
        return manual(step, DispatchReason.RESULT_INVALID, problem)
    receipt_id = str(receipt.get("receipt_id"))
    actions: list[Action] = [
        Move(S.SUCCEEDED, TOOL_EFFECT_RECONCILED if reconciled else TOOL_RESULT_RECORDED,
             attempt=attempt, result=result, receipt_id=receipt_id, succeeded_at=step.now,
             detail="replayed answer" if receipt.get("replayed") else None),
        CommitEffect(producer_of(step, attempt), result, receipt_id)]
    if reconciled:
        actions.append(Count(metrics.RECONCILED, step.call.tool_name))
    return actions + compensate.after_success(step.call, step.run)


def producer_of(step: Situation, proof: Attempt) -> Attempt:
    """The attempt that applied the effect: the one a replayed receipt names, else the one that
    got the answer (docs/design.md §5.11: the audit names who did it, not who asked afterwards)."""
    settled_by = (proof.receipt or {}).get("settled_by_attempt")
    return next((attempt for attempt in step.attempts if attempt.attempt == settled_by), proof)


def fail(step: Situation, attempt: Attempt | None, reason: DispatchReason, detail: str, *,
         reconciled: bool = False) -> list[Action]:
    """Only on evidence that nothing was applied."""
    actions: list[Action] = [
        Move(S.FAILED, TOOL_EFFECT_RECONCILED if reconciled else TOOL_RESULT_RECORDED,
             attempt=attempt, reason=reason, detail=detail)]
    if reconciled:
        actions.append(Count(metrics.RECONCILED, step.call.tool_name))
    return actions + compensate.after_failure(step.call, reason, detail)


def refuse(step: Situation, refusal: Refusal) -> list[Action]:
    """No dispatch, and the reason on record."""
    actions: list[Action] = [Move(refusal.state, DISPATCH_REFUSED, reason=refusal.reason,
                                  detail=refusal.detail)]
    if refusal.reason in RUN_STOPPED:
        return actions
    return actions + compensate.after_failure(step.call, refusal.reason, refusal.detail)


def manual(step: Situation, reason: DispatchReason, detail: str) -> list[Action]:
    """Escalation with the evidence: every attempt and what it came to is in the event.

    A compensation whose outcome nobody knows leaves its original COMPENSATING: calling it
    failed could make a person compensate twice. The saga waits for the resolution."""
    evidence = "; ".join(f"#{a.attempt} {a.kind} fence {a.fence}: {a.status} ({a.detail})"
                         for a in step.attempts)
    return [Move(S.MANUAL_REVIEW, MANUAL_REVIEW_REQUIRED, attempt=step.latest, reason=reason,
                 detail=f"{detail}. Evidence: {evidence or 'no attempts'}"),
            Count(metrics.MANUAL_REVIEW, step.call.tool_name)]


def unregistered_tool(step: Situation) -> list[Action]:
    """The registry no longer declares the tool (a redeploy removed it)."""
    call = step.call
    refusal = Refusal(S.DENIED, DispatchReason.UNKNOWN_TOOL,
                      f"{call.tool_name} v{call.tool_version} is not in the registry")
    if call.state in (S.AUTHORIZED, S.INTENT_RECORDED):
        return refuse(step, refusal)
    if call.state in (S.DISPATCHING, S.UNKNOWN, S.RECONCILING):
        return manual(step, refusal.reason, refusal.detail)
    return [Postpone(None)]
