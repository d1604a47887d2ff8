"""Phase repair: an operator's resolution (``shared/contracts/resolutions.py``) settles a call
whose outcome nobody could establish — only one in RECONCILING or MANUAL_REVIEW, only under a
resolution rule of the current policy, and a success only with a result the tool's schema
accepts. A refused resolution is recorded, and the call's step goes on as if it had not come.
"""

from __future__ import annotations

from services.dispatcher import metrics
from services.dispatcher.decide import compensate
from services.dispatcher.decide.actions import Action, CommitEffect, ConcludeRepair, Count, Move
from services.dispatcher.decide.situation import Repair, Situation
from services.dispatcher.results import parsed_result
from shared.contracts.dispatch import TOOL_OUTCOME_RESOLVED, CallState as S, DispatchReason
from shared.contracts.intake import Intent
from shared.contracts.resolutions import Resolution


def resolve(step: Situation, repair: Repair) -> tuple[list[Action], bool]:
    """(the actions, whether they settle the call)."""
    resolution = Resolution.model_validate(repair.request)
    refusal, detail, rule, result = resolution_refusal(step, resolution)
    if refusal is not None:
        return [ConcludeRepair(repair.event_id, "refused", f"{refusal}: {detail}",
                               resolution.operator_id)], False
    succeeded = resolution.outcome == "succeeded"
    reason = DispatchReason.RESOLVED_BY_OPERATOR
    actions: list[Action] = [
        Move(S.SUCCEEDED if succeeded else S.FAILED, TOOL_OUTCOME_RESOLVED, attempt=step.latest,
             reason=reason, detail=f"{resolution.reason} (resolution rule {rule})", result=result,
             receipt_id=resolution.receipt_id, succeeded_at=step.now if succeeded else None,
             operator_id=resolution.operator_id, evidence=resolution.evidence),
        ConcludeRepair(repair.event_id, "applied", None, resolution.operator_id),
        Count(metrics.RESOLUTION, step.call.tool_name)]
    if succeeded:
        actions.append(CommitEffect(step.latest, result, resolution.receipt_id))
        return actions + compensate.after_success(step.call, step.run), True
    return actions + compensate.after_failure(step.call, reason, resolution.reason), True


def resolution_refusal(step: Situation, resolution: Resolution):
    """(reason, detail, rule, result): the refusal, or None with the resolution rule that
    allows it and the validated result fields it promotes."""
    call, policy = step.call, step.judges.policy
    if call.state not in (S.RECONCILING, S.MANUAL_REVIEW) or step.latest is None:
        return (DispatchReason.CALL_NOT_UNRESOLVED, f"the call is {call.state}", None, None)
    intent = Intent.model_validate(call.intent)
    rule = policy.resolution_rule(resolution.operator_id, intent, resolution.outcome)
    if rule is None:
        return (DispatchReason.REPAIR_NOT_AUTHORIZED, f"no resolution rule of policy "
                f"{policy.current_version()} lets {resolution.operator_id} settle it as "
                f"{resolution.outcome}", None, None)
    if resolution.outcome == "failed":
        return None, None, rule, None
    if step.tool is None:
        return (DispatchReason.UNKNOWN_TOOL, "the registry no longer declares the tool whose "
                "result would be validated", None, None)
    result, problem = parsed_result(step.tool, resolution.result)
    if problem is not None:
        return DispatchReason.RESULT_INVALID, problem, None, None
    return None, None, rule, result
