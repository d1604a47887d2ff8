"""⚑ ``ledger.approvals`` (inbound): the agent that proposed a call withdraws it while it waits
for people's approval.

Published by the MCP gateway for an MCP client's ``tasks/cancel`` (signed by the gateway, naming
the agent in the signature's ``agent`` claim, as its proposals are) or by any Kafka client an
agent writes with, signed by the agent (``intentledger-withdrawal+jws``). Read by the policy,
which owns approval requests. It counts only if the signature proves the call's own proposer
sends it (``shared.identity.delegation``), and only while the call still awaits approval: then
the call is denied ``call_withdrawn`` exactly as a person's refusal would deny it, an approval
given afterwards does not count, and nothing is dispatched. A call already decided (allowed,
denied, or under way) is not touched: withdrawing is not cancelling an effect.
"""

from __future__ import annotations

import uuid

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

CALL_WITHDRAWAL_REQUESTED = "CallWithdrawalRequested"


class CallWithdrawal(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    tenant_id: str = Field(min_length=1, max_length=64)
    run_id: str = Field(min_length=1, max_length=200)
    logical_call_id: uuid.UUID
    principal_id: str = Field(min_length=1, max_length=200, description=(
        "The agent that proposed the call: only it may withdraw it."))
    reason: str = Field(min_length=1, max_length=2000, description="Why, for the audit.")
    decided_at: AwareDatetime
