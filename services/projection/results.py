"""Telling the agent that a call it proposed has settled, on its tenant's
``agent.results.<tenant>`` (⚑)."""

from __future__ import annotations

from services.projection.reducer import CallRow
from shared.contracts.results import TOOL_CALL_SETTLED, ToolCallSettled
from shared.messaging.envelope import Envelope

PRODUCER = "projection"


def settled(call: CallRow, cause: Envelope) -> Envelope:
    """Only the validated result the dispatcher recorded reaches the agent; the event that
    settled the call is named as the cause (and its trace continues)."""
    payload = ToolCallSettled(
        run_id=call.run_id, call_id=call.provider_call_id, logical_call_id=call.logical_call_id,
        operation_key=call.operation_key, tool_name=call.tool_name, tool_version=call.tool_version,
        status=call.state, reason_code=call.reason, receipt_id=call.receipt_id, result=call.result,
        settled_at=call.updated_at)
    return Envelope.new(event_type=TOOL_CALL_SETTLED, run_id=call.run_id, producer=PRODUCER,
                        payload=payload.model_dump(mode="json"), causation=cause)
