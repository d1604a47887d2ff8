"""The dispatcher's account of each call, on ``ledger.dispatch`` (internal; the projection and
auditors read it). Every event carries the call's state and version after the transition (so
a reader applies them with a compare-and-swap), the worker and fence that made it, and the
attempt it concerns: enough to answer, for any effect, who, under which policy, by which
worker and fence, in which attempt, with which receipt (docs/design.md §5.11).
"""

from __future__ import annotations

import uuid
from enum import StrEnum
from typing import Any, Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

DISPATCH_INTENT_RECORDED = "DispatchIntentRecorded"
DISPATCH_REFUSED = "DispatchRefused"
TOOL_ATTEMPT_STARTED = "ToolAttemptStarted"
TOOL_OUTCOME_MARKED_UNKNOWN = "ToolOutcomeMarkedUnknown"
TOOL_EFFECT_RECONCILED = "ToolEffectReconciled"
TOOL_RESULT_RECORDED = "ToolResultRecorded"
MANUAL_REVIEW_REQUIRED = "ManualReviewRequired"
COMPENSATION_REQUESTED = "CompensationRequested"
COMPENSATION_SETTLED = "CompensationSettled"
RUN_ABORTED = "RunAborted"
TOOL_OUTCOME_RESOLVED = "ToolOutcomeResolved"
DISPATCH_EVENTS = (DISPATCH_INTENT_RECORDED, DISPATCH_REFUSED, TOOL_ATTEMPT_STARTED,
                   TOOL_OUTCOME_MARKED_UNKNOWN, TOOL_EFFECT_RECONCILED, TOOL_RESULT_RECORDED,
                   MANUAL_REVIEW_REQUIRED, COMPENSATION_REQUESTED, COMPENSATION_SETTLED, RUN_ABORTED,
                   TOOL_OUTCOME_RESOLVED)


class CallState(StrEnum):
    """docs/design.md §4, from where the dispatcher takes over (AUTHORIZED) onwards."""

    AUTHORIZED = "AUTHORIZED"
    INTENT_RECORDED = "INTENT_RECORDED"
    DISPATCHING = "DISPATCHING"
    UNKNOWN = "UNKNOWN"
    RECONCILING = "RECONCILING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    MANUAL_REVIEW = "MANUAL_REVIEW"
    DENIED = "DENIED"
    EXPIRED = "EXPIRED"
    COMPENSATING = "COMPENSATING"
    COMPENSATED = "COMPENSATED"
    COMPENSATION_FAILED = "COMPENSATION_FAILED"


class DispatchReason(StrEnum):
    """Why a call was not dispatched, failed, or needs a person; stable codes."""

    CAPABILITY_SIGNATURE_INVALID = "capability_signature_invalid"
    CAPABILITY_KEY_UNKNOWN = "capability_key_unknown"
    CAPABILITY_NOT_FOR_THIS_INTENT = "capability_not_for_this_intent"
    CAPABILITY_EXPIRED = "capability_expired"
    APPROVAL_EXPIRED = "approval_expired"
    APPROVAL_MISSING = "approval_missing"
    POLICY_CHANGED_TO_DENY = "policy_changed_to_deny"
    POLICY_CHANGED_REQUIRES_APPROVAL = "policy_changed_requires_approval"
    RUN_ATTEMPT_BUDGET_EXHAUSTED = "run_attempt_budget_exhausted"
    CALL_ATTEMPT_BUDGET_EXHAUSTED = "call_attempt_budget_exhausted"
    RUN_DEADLINE_PASSED = "run_deadline_passed"
    RUN_ABORTED = "run_aborted"
    RUN_CANCELLED = "run_cancelled"
    UNKNOWN_TOOL = "unknown_tool"
    REJECTED_BY_TOOL = "rejected_by_tool"
    RESULT_INVALID = "result_invalid"
    NO_RECONCILIATION_PATH = "no_reconciliation_path"
    RECONCILIATION_BUDGET_EXHAUSTED = "reconciliation_budget_exhausted"
    DOWNSTREAM_KEY_EXPIRED = "downstream_key_expired"
    COMPENSATION_NOT_AUTHORIZED = "compensation_not_authorized"
    COMPENSATION_ARGUMENTS_MISSING = "compensation_arguments_missing"
    RESOLVED_BY_OPERATOR = "resolved_by_operator"
    REPAIR_NOT_AUTHORIZED = "repair_not_authorized"
    CALL_NOT_UNRESOLVED = "call_not_unresolved"


class CallEvent(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    run_id: str
    logical_call_id: uuid.UUID
    operation_key: str
    tool_name: str
    tool_version: str
    principal_id: str
    tenant_id: str
    policy_version: str
    state: CallState = Field(description="The call's state after this event.")
    version: int = Field(ge=1, description="The call's version after this event (CAS).")
    worker_id: str
    fence: int = Field(ge=0)
    attempt: int | None = Field(default=None, ge=1)
    attempt_kind: Literal["send", "lookup"] | None = None
    reason: str | None = None
    detail: str | None = Field(default=None, description="For people; never parse it.")
    receipt_id: str | None = None
    result: dict[str, Any] | None = Field(default=None, description="Validated fields only.")
    compensates: uuid.UUID | None = None
    operator_id: str | None = Field(default=None, description="Who resolved it by hand.")
    evidence: str | None = Field(default=None, description="What the operator checked.")
    at: AwareDatetime
