"""⚑ ``ledger.effects`` (outbound): effects that committed downstream, for any subscriber.

One event per committed business effect, carrying what an audit asks (docs/design.md §5.11): which
principal, which policy version, which worker and fence, which attempt, which downstream
receipt. A compensation is an effect of its own, naming the effect it compensates. Only parsed
result fields validated against the tool's result schema appear in ``result``.
"""

from __future__ import annotations

import uuid
from typing import Any

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

EFFECT_COMMITTED = "EffectCommitted"


class CommittedEffect(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    run_id: str
    tenant_id: str
    principal_id: str
    logical_call_id: uuid.UUID
    operation_key: str
    tool_name: str
    tool_version: str
    arguments_hash: str
    canonical_arguments: dict[str, Any] = Field(description="Money in integer minor units.")
    policy_version: str
    worker_id: str
    fence: int = Field(ge=0)
    attempt: int = Field(ge=1)
    downstream_receipt_id: str
    result: dict[str, Any] = Field(description="Validated, parsed fields only; never raw output.")
    compensates: uuid.UUID | None = Field(
        default=None, description="The intent whose effect this one compensates.")
    committed_at: AwareDatetime
