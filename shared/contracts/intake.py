"""What the intake says about each proposed call: on ``agent.results.<tenant>`` (⚑) and
``ledger.intake``.

The envelope's ``event_type`` names the outcome (``ProposalAccepted``, ``DuplicateProposal``,
``ProposalRejected``); these are the payloads. ``ProposalOutcome``, what the agent is told, is
the agent client's model (``intentledger_client.contracts``), written with here. Agents pair an
outcome with their tool call by ``call_id`` (OpenAI ``tool_call_id``, Anthropic
``tool_use_id``), never by position.
"""

from __future__ import annotations

import uuid
from enum import StrEnum
from typing import Any

from intentledger_client.contracts import (DUPLICATE_PROPOSAL, OUTCOME_OF, PROPOSAL_ACCEPTED,
                                           PROPOSAL_REJECTED, ProposalOutcome)
from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

__all__ = ["DUPLICATE_PROPOSAL", "OUTCOME_OF", "PROPOSAL_ACCEPTED", "PROPOSAL_REJECTED",
           "IntakeReason", "Intent", "ProposalOutcome"]


class IntakeReason(StrEnum):
    """Refusals that need the intake's records; stable, agents branch on them."""

    OPERATION_KEY_CONFLICT = "operation_key_conflict"
    OPERATION_KEY_IN_USE = "operation_key_in_use"
    OPERATION_KEY_EXPIRED = "operation_key_expired"
    PROVIDER_CALL_ID_REUSED = "provider_call_id_reused"
    RUN_DEADLINE_PASSED = "run_deadline_passed"
    RUN_PRINCIPAL_MISMATCH = "run_principal_mismatch"
    RUN_CALL_BUDGET_EXHAUSTED = "run_call_budget_exhausted"
    RUN_COST_BUDGET_EXHAUSTED = "run_cost_budget_exhausted"
    RUN_COST_CURRENCY_MISMATCH = "run_cost_currency_mismatch"
    PROPOSAL_RATE_EXCEEDED = "proposal_rate_exceeded"
    INTERNAL_ERROR = "internal_error"


class _Contract(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Intent(_Contract):
    """One business intent, durable before anything is dispatched (docs/design.md §3)."""

    run_id: str
    provider: str
    provider_call_id: str
    logical_call_id: uuid.UUID
    operation_key: str
    tool_name: str
    tool_version: str
    arguments_hash: str = Field(description="SHA-256 of the RFC 8785 form after the tool's rules.")
    canonical_arguments: dict[str, Any] = Field(description="Money in integer minor units.")
    principal_id: str
    tenant_id: str
    deadline_at: AwareDatetime | None
    run_max_attempts: int | None = Field(default=None, ge=1, description=(
        "The run's attempt budget, counted by the dispatcher across all of the run's calls."))
    compensates: uuid.UUID | None = Field(default=None, description=(
        "Set only on a compensation the dispatcher proposed (ledger.compensations): the call "
        "whose effect it gives back. Never set by the intake."))
    signed_by: str | None = Field(default=None, description=(
        "The gateway that signed the proposal for its principal (docs/mcp.md); None when the "
        "principal signed itself."))
    person_id: str | None = Field(default=None, description=(
        "The person the gateway says the principal acted for, if it named one."))

    def is_requester(self, principal_id: str) -> bool:
        """Whether ``principal_id`` asked for this call: the agent that proposed it, or the
        person a gateway proposed it for. A requester approves or resolves nothing of its own."""
        return principal_id in (self.principal_id, self.person_id)
