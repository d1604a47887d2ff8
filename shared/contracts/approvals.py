"""⚑ ``ledger.approvals`` (inbound): a person's decision on a call that needs approval.

Published by operators' tools (``intentledger approve|reject`` once the policy service exists)
or any Kafka client. An approval binds the exact intent: its ``arguments_hash`` must equal the
intent's, it expires, and the policy refuses one from the requester or for other arguments.
"""

from __future__ import annotations

import uuid
from typing import Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

APPROVAL_GRANTED = "ApprovalGranted"
APPROVAL_REFUSED = "ApprovalRefused"


class ApprovalDecision(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    decision: Literal["granted", "refused"]
    run_id: str = Field(min_length=1, max_length=200)
    tenant_id: str = Field(min_length=1, max_length=64)
    logical_call_id: uuid.UUID
    operation_key: str = Field(min_length=1, max_length=200)
    arguments_hash: str = Field(pattern=r"^[0-9a-f]{64}$",
                                description="The intent's hash: an approval covers these arguments only.")
    approver_id: str = Field(min_length=1, max_length=200)
    reason: str | None = Field(default=None, max_length=2000)
    decided_at: AwareDatetime
    expires_at: AwareDatetime | None = Field(
        default=None, description="Required for a grant: authority outlives nothing (docs/design.md §5.5).")
