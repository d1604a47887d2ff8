"""⚑ ``agent.results.<tenant>`` (outbound): a proposed call's settled outcome, for the agent
that asked.

The intake answers each proposal on its tenant's ``agent.results.<tenant>`` at once
(``ProposalOutcome``); once the call settles, the projection adds one ``ToolCallSettled``,
correlated by the same provider call id (``call_id``). A call may settle more than once over
its life — SUCCEEDED, then COMPENSATED by a saga; MANUAL_REVIEW, then resolved by an
operator: each settled state the projection records is announced once, and the latest is
always announced (when the ledger's events arrive late, an earlier settled state may be
skipped).

Tool output is untrusted data (docs/design.md §5.9): ``result`` holds only the fields the tool's
result schema declares, validated and size-checked by the dispatcher before it recorded them.
Nothing else a downstream said — raw receipts, free-text details that may quote it — is ever
copied here, so none of it can reach the model as an instruction.
"""

from __future__ import annotations

import uuid
from typing import Any, Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

TOOL_CALL_SETTLED = "ToolCallSettled"

SettledStatus = Literal["SUCCEEDED", "FAILED", "DENIED", "EXPIRED", "MANUAL_REVIEW", "COMPENSATED",
                        "COMPENSATION_FAILED"]


class ToolCallSettled(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    run_id: str
    call_id: str = Field(description="The provider's call id (OpenAI tool_call_id, Anthropic "
                                     "tool_use_id): pair by it, never by position.")
    logical_call_id: uuid.UUID
    operation_key: str | None = None
    tool_name: str | None = None
    tool_version: str | None = None
    status: SettledStatus
    reason_code: str | None = Field(default=None, description="Stable, machine-readable; why the "
                                    "call did not succeed (or needs a person).")
    receipt_id: str | None = Field(default=None,
                                   description="The downstream's receipt of the effect.")
    result: dict[str, Any] | None = Field(default=None, description=(
        "Validated result fields only (the tool's result schema, checked by the dispatcher); "
        "never raw tool output."))
    settled_at: AwareDatetime = Field(description="When the ledger recorded this state.")
