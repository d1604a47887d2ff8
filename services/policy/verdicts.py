"""From a ``Decision`` to what is written and announced: a ``Verdict``.

A verdict is one row of ``policy.decisions`` and exactly one event on
``ledger.authorizations``: allowed (with its capability), denied (with its reason) or
awaiting approval (with the approval request's expiry). ``inputs`` keeps what the decision
read, so an audit can replay it: the intent, the amount, the usage read and the limits applied.
"""

from __future__ import annotations

import uuid
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

from joserfc.jwk import OKPKey

from services.policy.capability import issue
from shared.policy.document import ApprovalRule
from shared.policy.engine import Decision, Request
from shared.policy.limits import Usage
from shared.contracts.authorizations import Capability, PolicyReason
from shared.contracts.intake import Intent

Outcome = Literal["allowed", "denied", "awaiting_approval"]
OUTCOME_OF = {"allow": "allowed", "deny": "denied", "require_approval": "awaiting_approval"}


@dataclass(frozen=True)
class Verdict:
    decision_id: uuid.UUID
    outcome: Outcome
    policy_version: str
    rule: str | None
    reason_code: str | None
    message: str
    inputs: dict[str, Any]
    issued_at: datetime
    expires_at: datetime | None = None
    """The capability's expiry when allowed; the approval request's when awaiting."""
    capability: Capability | None = None
    approval: ApprovalRule | None = None


def verdict_of(decision_id: uuid.UUID, decision: Decision, request: Request,
               usage: Usage | None, key: OKPKey) -> Verdict:
    intent, now = request.intent, request.now
    capability = expires_at = None
    if decision.effect == "allow":
        capability = issue(decision_id, intent, decision, now, key)
        expires_at = capability.expires_at
    elif decision.effect == "require_approval":
        expires_at = _capped(now + timedelta(seconds=decision.approval.ttl_seconds), intent)
    inputs = {"intent": intent.model_dump(mode="json"), "amount": request.amount,
              "usage": None if usage is None else {n: asdict(u) for n, u in usage.items()},
              "limits": decision.limits,
              "approvals": [a.model_dump(mode="json") for a in request.approvals]}
    return Verdict(decision_id, OUTCOME_OF[decision.effect], decision.policy_version,
                   decision.rule, decision.reason, decision.message, inputs, now, expires_at,
                   capability, decision.approval)


def denial(decision_id: uuid.UUID, policy_version: str, rule: str | None, reason: PolicyReason,
           message: str, now: datetime, inputs: dict[str, Any]) -> Verdict:
    """A denial that is not a rule's: a refusal by an approver, a lapsed request, a tool the
    policy's registry does not know."""
    return Verdict(decision_id, "denied", policy_version, rule, reason, message, inputs, now)


def _capped(when: datetime, intent: Intent) -> datetime:
    """Nothing waits beyond the intent's deadline."""
    return min(when, intent.deadline_at) if intent.deadline_at is not None else when
