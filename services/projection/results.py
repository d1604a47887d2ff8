"""Telling the agent what the policy made of a call it proposed, on its tenant's
``agent.results.<tenant>`` (⚑): that it awaits approval, or that it was denied. What the
dispatcher makes of it, the dispatcher announces (``services/dispatcher/events.py``)."""

from __future__ import annotations

from services.projection.facts import AWAITING_APPROVAL
from services.projection.reducer import CallRow
from shared.contracts.authorizations import ApprovalRequest
from shared.contracts.results import (TOOL_CALL_AWAITING_APPROVAL, TOOL_CALL_SETTLED,
                                      ToolCallAwaitingApproval, ToolCallSettled)
from shared.messaging.envelope import Envelope

PRODUCER = "projection"


def announcement(call: CallRow, cause: Envelope) -> Envelope:
    """The event that brought the call to its announced state is named as the cause (and its
    trace continues)."""
    if call.state == AWAITING_APPROVAL:
        return awaiting_approval(call, cause)
    return settled(call, cause)


def settled(call: CallRow, cause: Envelope) -> Envelope:
    """Only the validated result the dispatcher recorded reaches the agent."""
    payload = ToolCallSettled(
        run_id=call.run_id, call_id=call.provider_call_id, logical_call_id=call.logical_call_id,
        operation_key=call.operation_key, tool_name=call.tool_name, tool_version=call.tool_version,
        status=call.state, reason_code=call.reason, receipt_id=call.receipt_id, result=call.result,
        settled_at=call.updated_at)
    return Envelope.new(event_type=TOOL_CALL_SETTLED, run_id=call.run_id, producer=PRODUCER,
                        payload=payload.model_dump(mode="json"), causation=cause)


def awaiting_approval(call: CallRow, cause: Envelope) -> Envelope:
    """``cause`` is the policy's ApprovalRequested: how many approvals, by when. Who may approve
    is not copied: the approvers' names and patterns are the policy's, not the agent's."""
    request = ApprovalRequest.model_validate(cause.payload)
    payload = ToolCallAwaitingApproval(
        run_id=call.run_id, call_id=call.provider_call_id, logical_call_id=call.logical_call_id,
        operation_key=call.operation_key, tool_name=call.tool_name, tool_version=call.tool_version,
        approvals_required=request.quorum, requested_at=request.requested_at,
        expires_at=request.expires_at)
    return Envelope.new(event_type=TOOL_CALL_AWAITING_APPROVAL, run_id=call.run_id,
                        producer=PRODUCER, payload=payload.model_dump(mode="json"),
                        causation=cause)
