"""Whether an approval on ``ledger.approvals`` may count for the call it names. Pure.

An approval binds the exact intent: the same run, tenant and operation key, the same
``arguments_hash`` (approving 40 EUR never approves 4,000), an approver the rule names who is
not the requester (the agent, nor the person a gateway proposed it for: a person may not ask
through an agent and approve as themselves), and, for a grant, an expiry still ahead. Every
approval received is recorded whether it counted or not, with the reason it did not.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from fnmatch import fnmatchcase

from shared.policy.document import ApprovalRule
from shared.contracts.approvals import ApprovalDecision
from shared.contracts.authorizations import GrantedApproval, PolicyReason
from shared.contracts.intake import Intent

AWAITING = "awaiting_approval"


@dataclass(frozen=True)
class PendingCall:
    """What the decisions store holds for the call an approval names."""

    outcome: str
    intent: Intent
    requirement: ApprovalRule | None
    """The approval rule in force when approval was requested."""
    expires_at: datetime | None


def approval_refusal(pending: PendingCall | None, approval: ApprovalDecision,
                     now: datetime) -> PolicyReason | None:
    """Why this approval counts for nothing, or None when it counts."""
    if pending is None or pending.outcome != AWAITING or pending.requirement is None:
        return PolicyReason.APPROVAL_NOT_PENDING
    intent = pending.intent
    if ((approval.tenant_id, approval.run_id, approval.operation_key)
            != (intent.tenant_id, intent.run_id, intent.operation_key)):
        return PolicyReason.APPROVAL_NOT_FOR_THIS_CALL
    if approval.arguments_hash != intent.arguments_hash:
        return PolicyReason.APPROVAL_FOR_OTHER_ARGUMENTS
    if intent.is_requester(approval.approver_id):
        return PolicyReason.APPROVER_IS_REQUESTER
    if not any(fnmatchcase(approval.approver_id, p) for p in pending.requirement.approvers):
        return PolicyReason.APPROVER_NOT_ALLOWED
    if pending.expires_at is not None and pending.expires_at <= now:
        return PolicyReason.APPROVAL_REQUEST_EXPIRED
    if approval.decision == "granted" and (approval.expires_at is None or approval.expires_at <= now):
        return PolicyReason.APPROVAL_EXPIRED
    return None


def granted(approval: ApprovalDecision, event_id: uuid.UUID) -> GrantedApproval:
    """A grant that passed ``approval_refusal`` (so it has an expiry)."""
    return GrantedApproval(approver_id=approval.approver_id, decided_at=approval.decided_at,
                           expires_at=approval.expires_at, approval_event_id=event_id)


def already_counted(approver_id: str, chain: Iterable[GrantedApproval], now: datetime) -> bool:
    """The same approver twice counts once; a new grant replaces one that has expired."""
    return any(g.approver_id == approver_id and g.expires_at > now for g in chain)
