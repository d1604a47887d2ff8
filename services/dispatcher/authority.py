"""Authority checked at the instant of dispatch (docs/design.md §5.5), not when the model proposed.

A queued call can outlive its capability, its approvals, the policy version that allowed it,
the run's attempt budget and the run's deadline; each is checked again right before every send
attempt, in the transaction that records the attempt. A compensation too carries the policy's
capability (the dispatcher proposes it, ``compensations.py``), and is not stopped by its run's
abort, which is what it answers.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal, Protocol

from services.dispatcher.repository import Call, Run
from shared import capabilities
from shared.contracts.authorizations import Capability, GrantedApproval
from shared.contracts.dispatch import CallState, DispatchReason
from shared.contracts.intake import Intent

Verdict = Literal["allow", "deny", "require_approval"]


class PolicyView(Protocol):
    """What the dispatcher needs of the deployment's policy: its current version and a
    re-evaluation of one intent under it (rate limits were counted at the first decision)."""

    def current_version(self) -> str: ...

    def catch_up(self) -> None:
        """Re-read the policy now: the capability may come from a newer version than the
        last one this process loaded."""

    def evaluate(self, intent: Intent,
                 approvals: tuple[GrantedApproval, ...] = ()) -> Verdict: ...

    def resolution_rule(self, operator_id: str, intent: Intent, outcome: str) -> str | None: ...


@dataclass(frozen=True)
class Refusal:
    state: CallState
    reason: DispatchReason
    detail: str


def refusal_at_dispatch(call: Call, run: Run, policy: PolicyView, keys: capabilities.PublicKeys,
                        now: datetime, *, requires_approval: bool = False) -> Refusal | None:
    """``requires_approval``: the registry's flag for the call's tool; checked here again so
    that no policy file, however written, lets an irreversible call out unapproved."""
    intent = Intent.model_validate(call.intent)
    if now >= call.deadline_at:
        return Refusal(CallState.EXPIRED, DispatchReason.RUN_DEADLINE_PASSED,
                       f"the deadline {call.deadline_at.isoformat()} has passed")
    if call.compensates is None and run.aborted_at is not None:
        if run.abort_code == DispatchReason.RUN_CANCELLED:
            return Refusal(CallState.DENIED, DispatchReason.RUN_CANCELLED,
                           f"the run was cancelled: {run.abort_reason}")
        return Refusal(CallState.DENIED, DispatchReason.RUN_ABORTED,
                       f"the run stopped dispatching: {run.abort_reason}")
    if call.policy_refusal is not None:
        refused = call.policy_refusal
        return Refusal(CallState.DENIED, DispatchReason.COMPENSATION_NOT_AUTHORIZED,
                       f"policy {call.policy_version} refused it: {refused.get('reason_code')}"
                       f" ({refused.get('message')})")
    if call.capability is None:
        return Refusal(CallState.DENIED, DispatchReason.CAPABILITY_NOT_FOR_THIS_INTENT,
                       "no capability")
    capability = Capability.model_validate(call.capability)
    if reason := capabilities.refusal(capability, intent, keys, now):
        return Refusal(CallState.DENIED, DispatchReason(reason),
                       f"capability {capability.capability_id}: {reason}")
    issued_under = capability.policy_version
    if requires_approval and not capability.approvals:
        return Refusal(CallState.DENIED, DispatchReason.APPROVAL_MISSING,
                       f"{call.tool_name} is irreversible: it needs an approval before dispatch")
    if issued_under != policy.current_version():
        policy.catch_up()
    if issued_under != policy.current_version():
        approvals = capability.approvals
        verdict = policy.evaluate(intent, approvals)
        if verdict == "deny":
            return Refusal(CallState.DENIED, DispatchReason.POLICY_CHANGED_TO_DENY,
                           f"policy {policy.current_version()} denies what "
                           f"{issued_under} allowed")
        if verdict == "require_approval":
            return Refusal(CallState.DENIED, DispatchReason.POLICY_CHANGED_REQUIRES_APPROVAL,
                           f"policy {policy.current_version()} requires approvals this call "
                           "does not have")
    return None
