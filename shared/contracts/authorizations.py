"""The policy's decisions, on ``ledger.authorizations`` (internal; the dispatcher and the
projection read them).

An allow carries a **capability**: a narrow, expiring, tamper-evident grant for exactly one
intent (its run, call, operation key, tool, principal, tenant and argumentsHash) under one
policy version and approval chain. The dispatcher checks it again at dispatch (docs/design.md §5.5):
holding one is necessary, never sufficient.
"""

from __future__ import annotations

import uuid
from enum import StrEnum
from typing import Any

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

from shared.contracts.intake import Intent

AUTHORIZATION_ALLOWED = "AuthorizationAllowed"
AUTHORIZATION_DENIED = "AuthorizationDenied"
APPROVAL_REQUESTED = "ApprovalRequested"


class _Contract(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class GrantedApproval(_Contract):
    """One person's approval that counts towards a decision's quorum."""

    approver_id: str
    decided_at: AwareDatetime
    expires_at: AwareDatetime
    approval_event_id: uuid.UUID = Field(description="The ledger.approvals event it came from.")


class Capability(_Contract):
    """Signed by the policy's Ed25519 key over the RFC 8785 form of every other field
    (``shared.capabilities``); changing any field breaks the signature, and anyone holding the
    policy's public keys can check it."""

    capability_id: uuid.UUID
    decision_id: uuid.UUID
    run_id: str
    logical_call_id: uuid.UUID
    operation_key: str
    principal_id: str
    tenant_id: str
    tool_name: str
    tool_version: str
    arguments_hash: str
    deadline_at: AwareDatetime | None = Field(description="The intent's run deadline, signed so "
                                             "that no copy of the intent can stretch it.")
    run_max_attempts: int | None = Field(description="The run's attempt budget, signed likewise.")
    policy_version: str
    approvals: tuple[GrantedApproval, ...] = ()
    limits: dict[str, Any] = Field(default_factory=dict, description="The limits the decision "
                                   "applied (caps, windows), for the audit.")
    issued_at: AwareDatetime
    expires_at: AwareDatetime
    signature: str = Field(pattern=r"^[A-Za-z0-9_-]+\.\.[A-Za-z0-9_-]+$", max_length=1024,
                           description="A compact JWS with a detached payload (the RFC 8785 "
                           "form of every other field), EdDSA over Ed25519; its protected "
                           "header names the policy key's kid.")


class Authorization(_Contract):
    """Payload of ``AuthorizationAllowed``."""

    intent: Intent
    decision_id: uuid.UUID
    policy_version: str
    rule: str = Field(description="Name of the policy rule that decided.")
    capability: Capability


class AuthorizationRefusal(_Contract):
    """Payload of ``AuthorizationDenied``: nothing will be dispatched for this intent."""

    intent: Intent
    decision_id: uuid.UUID
    policy_version: str
    rule: str | None = None
    reason_code: str = Field(description="Stable, machine-readable.")
    message: str


class ApprovalRequest(_Contract):
    """Payload of ``ApprovalRequested``: the intent waits for people (AWAITING_APPROVAL)."""

    intent: Intent
    decision_id: uuid.UUID
    policy_version: str
    rule: str
    quorum: int = Field(ge=1)
    approvers: tuple[str, ...] = Field(description="Who may approve (patterns, '*' = anyone "
                                       "but the requester).")
    requested_at: AwareDatetime
    expires_at: AwareDatetime = Field(description="Unanswered by then: denied as expired.")


class PolicyReason(StrEnum):
    """Why the policy denied a call or refused an approval; stable, callers branch on them."""

    NO_MATCHING_RULE = "no_matching_rule"
    DENIED_BY_RULE = "denied_by_rule"
    AMOUNT_OVER_CAP = "amount_over_cap"
    CAP_CURRENCY_MISMATCH = "cap_currency_mismatch"
    RATE_LIMITED = "rate_limited"
    VELOCITY_LIMITED = "velocity_limited"
    DEADLINE_PASSED = "deadline_passed"
    TOOL_NOT_IN_REGISTRY = "tool_not_in_registry"
    APPROVAL_REFUSED = "approval_refused"
    APPROVAL_REQUEST_EXPIRED = "approval_request_expired"
    APPROVAL_NOT_PENDING = "approval_not_pending"
    APPROVAL_NOT_FOR_THIS_CALL = "approval_not_for_this_call"
    APPROVAL_FOR_OTHER_ARGUMENTS = "approval_for_other_arguments"
    APPROVER_IS_REQUESTER = "approver_is_requester"
    APPROVER_NOT_ALLOWED = "approver_not_allowed"
    APPROVAL_EXPIRED = "approval_expired"
    APPROVER_ALREADY_COUNTED = "approver_already_counted"
    NO_APPROVERS_FOR_TOOL = "no_approvers_for_tool"
    RUN_CANCELLED = "run_cancelled"
    CALL_WITHDRAWN = "call_withdrawn"
