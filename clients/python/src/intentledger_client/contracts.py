"""What the ledger tells an agent on its tenant's ``agent.results.<tenant>``: the public
contract's answer models, the very classes the server writes with (and exports as
``schemas/agent.results.schema.json``).

The intake answers each proposed call at once (``ProposalOutcome``; the envelope's
``event_type`` names it: ``ProposalAccepted``, ``DuplicateProposal``, ``ProposalRejected``).
A call that must wait for people first is announced as ``ToolCallAwaitingApproval`` (how many
approvals, by when), so the agent can tell its user. Once the call settles, the projection
adds one ``ToolCallSettled``, correlated by the same provider call id. A call may settle more
than once over its life — SUCCEEDED, then COMPENSATED by a saga; MANUAL_REVIEW, then resolved
by an operator: each settled state is announced once, and the latest always is.

Tool output is untrusted data: ``result`` holds only the fields the tool's result schema
declares, validated and size-checked by the dispatcher before it recorded them. Nothing else a
downstream said is ever copied here, so none of it can reach the model as an instruction.
"""

from __future__ import annotations

import hashlib
import uuid
from typing import Any, Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

PROPOSAL_ACCEPTED = "ProposalAccepted"
DUPLICATE_PROPOSAL = "DuplicateProposal"
PROPOSAL_REJECTED = "ProposalRejected"
TOOL_CALL_SETTLED = "ToolCallSettled"
TOOL_CALL_AWAITING_APPROVAL = "ToolCallAwaitingApproval"
OUTCOME_OF = {PROPOSAL_ACCEPTED: "accepted", DUPLICATE_PROPOSAL: "duplicate",
              PROPOSAL_REJECTED: "rejected"}
"""The intake's answer per envelope ``event_type``."""

SettledStatus = Literal["SUCCEEDED", "FAILED", "DENIED", "EXPIRED", "MANUAL_REVIEW", "COMPENSATED",
                        "COMPENSATION_FAILED"]


class ProposalOutcome(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    outcome: Literal["accepted", "duplicate", "rejected"]
    run_id: str
    call_id: str | None = Field(description="The provider's call id; null if none was readable.")
    proposal_id: uuid.UUID | None = Field(default=None, description=(
        "Id of the agent's record on agent.proposals (shared.contracts.proposals."
        "proposal_record_id): tells apart answers to two sends that reuse a call id."))
    provider: str | None = None
    tenant_id: str | None = Field(default=None, description=(
        "The proposal's tenant. On ledger.intake, always set: a message refused before its calls "
        "could be read carries the tenant its sender proved (its verified signature), and one "
        "whose sender proved none is not recorded there at all. On agent.results.<tenant>, null "
        "for such a message."))
    principal_id: str | None = Field(default=None, description="Who proposed; null as above.")
    person_id: str | None = Field(default=None, description=(
        "The person a gateway proposed for (docs/mcp.md), from the record's verified signature; "
        "null when the principal proposed for no person, and null as principal_id is above. "
        "With principal_id, whose call this is: the MCP gateway answers a handle only to that "
        "principal and person. Absent from answers written before the intake told persons."))
    logical_call_id: uuid.UUID | None = Field(default=None, description=(
        "The intent: the new one (accepted), the existing one (duplicate), or the one the "
        "operation key named before its record expired (rejected operation_key_expired, to the "
        "intent's proposer only). Null on every other refusal, operation_key_in_use among them: "
        "an intent is named only to the principal that proposed it."))
    operation_key: str | None = None
    tool_name: str | None = None
    tool_version: str | None = None
    arguments_hash: str | None = None
    state: str | None = Field(default=None, description="For a duplicate: the intent's state now.")
    intent_run_id: str | None = Field(default=None, description=(
        "For a duplicate or operation_key_expired: the run of the intent it names, under whose "
        "key (and partition) the intent's states are announced; another run than run_id when "
        "the operation key was first used there."))
    reason_code: str | None = Field(default=None, description="Stable, machine-readable.")
    message: str | None = Field(default=None, description="For people; never parse it.")
    retry_after_s: float | None = Field(default=None, ge=0, description=(
        "For proposal_rate_exceeded: when the same message, sent again, can be served. Absent when it "
        "never can (it carries more calls than the bucket holds: split it)."))


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


class ToolCallAwaitingApproval(BaseModel):
    """The call waits for people before it may take effect: nothing has happened yet. Who may
    approve stays the policy's (approvers' names are not the agent's business); the agent
    learns how many approvals and by when, and that the settled state will follow."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    run_id: str
    call_id: str = Field(description="The provider's call id: pair by it, never by position.")
    logical_call_id: uuid.UUID
    operation_key: str | None = None
    tool_name: str | None = None
    tool_version: str | None = None
    approvals_required: int = Field(ge=1, description="Distinct approvals the call needs.")
    requested_at: AwareDatetime
    expires_at: AwareDatetime = Field(description="Not approved by then, the call is denied "
                                      "(reason approval_request_expired).")


Announcement = ToolCallSettled | ToolCallAwaitingApproval
"""What a call's agent is told after the intake's answer (by the policy or the dispatcher)."""

ENVELOPE_HEADERS = ("event_id", "event_type", "schema_version", "run_id", "producer",
                    "correlation_id", "causation_id", "traceparent")
"""The event envelope's fields that a record carries in its Kafka headers too (beside
``content-type``: ``ENVELOPE_CONTENT_TYPE``); the ledger refuses a record whose two copies
disagree (``shared/messaging/envelope.py``)."""
ENVELOPE_CONTENT_TYPE = "application/json"
CALL_WITHDRAWAL_REQUESTED = "CallWithdrawalRequested"


class CallWithdrawal(BaseModel):
    """An agent's withdrawal of its own call while the call awaits people's approval. The
    policy counts it only if its signature proves the call's proposer sent it, and only while
    the call still waits: the call is then denied ``call_withdrawn``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    tenant_id: str = Field(min_length=1, max_length=64)
    run_id: str = Field(min_length=1, max_length=200)
    logical_call_id: uuid.UUID
    principal_id: str = Field(min_length=1, max_length=200, description=(
        "The agent that proposed the call: only it may withdraw it."))
    reason: str = Field(min_length=1, max_length=2000, description="Why, for the audit.")
    decided_at: AwareDatetime


_RECORD_NAMESPACE = uuid.UUID("5b0c3c4e-2a7f-4e4b-9a55-6f1f2f6f1a11")


def proposal_record_id(topic: str, partition: int, offset: int, timestamp: int,
                       value: bytes) -> uuid.UUID:
    """The id of one record on agent.proposals, echoed as ``proposal_id`` in its outcomes.

    The intake's inbox deduplicates redeliveries on it; the value's digest and the timestamp
    keep a recreated topic's reused offsets from passing for records already seen. An agent
    computes the same id from what its producer reports after sending (partition, offset,
    timestamp): never change it, both sides must agree.
    """
    digest = hashlib.sha256(value).hexdigest()
    return uuid.uuid5(_RECORD_NAMESPACE, f"{topic}/{partition}/{offset}/{timestamp}/{digest}")
