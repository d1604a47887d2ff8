"""⚑ ``ledger.resolutions`` (inbound): an operator settles by hand a call that reconciliation
could not settle (RECONCILING or MANUAL_REVIEW), with evidence.

Published by ``intentledger resolve`` or any Kafka client; read by the dispatcher, which owns
the call's state. A resolution is applied only if the policy's ``resolutions`` name the operator for the
call's tenant, tool and outcome (never the call's own principal), and only while the call is
unresolved; it becomes a ``ToolOutcomeResolved`` event carrying the operator and the evidence.
A ``succeeded`` resolution must name the downstream's receipt and give the result fields the tool's
result schema requires: it then counts as a committed effect like any other.
"""

from __future__ import annotations

import uuid
from typing import Any, Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, model_validator

RESOLUTION_REQUESTED = "ResolutionRequested"


class Resolution(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    logical_call_id: uuid.UUID
    run_id: str = Field(min_length=1, max_length=200)
    outcome: Literal["succeeded", "failed"]
    operator_id: str = Field(min_length=1, max_length=200)
    reason: str = Field(min_length=1, max_length=2000, description="Why, for the audit.")
    evidence: str = Field(min_length=1, max_length=4000, description=(
        "What the operator checked: a statement id, a ticket, a downstream query."))
    receipt_id: str | None = Field(default=None, min_length=1, max_length=200, description=(
        "The downstream's own id of the effect; required for succeeded."))
    result: dict[str, Any] | None = Field(default=None, description=(
        "For succeeded: the result fields, validated against the tool's result schema."))
    decided_at: AwareDatetime

    @model_validator(mode="after")
    def _succeeded_names_its_effect(self) -> Resolution:
        if self.outcome == "succeeded" and (self.receipt_id is None or self.result is None):
            raise ValueError("a succeeded resolution names the downstream receipt and its result")
        return self
