"""⚑ ``agent.results.<tenant>`` (outbound): a proposed call's settled outcome, for the agent
that asked. The model is the agent client's (``intentledger_client.contracts``): agents parse
with the classes the policy and the dispatcher write with.

The intake answers each proposal on its tenant's ``agent.results.<tenant>`` at once
(``ProposalOutcome``); once the call settles, one ``ToolCallSettled`` follows, correlated by
the same provider call id (``call_id``), from whoever decided it, in the transaction that
records it: the policy for a denial (and ``ToolCallAwaitingApproval`` for a call that waits for
people), the dispatcher for everything after. A call may settle more than once over its life — SUCCEEDED,
then COMPENSATED by a saga; MANUAL_REVIEW, then resolved by an operator: each settled state is
announced once, in the order the dispatcher recorded them.

Tool output is untrusted data (docs/design.md §5.9): ``result`` holds only the fields the tool's
result schema declares, validated and size-checked by the dispatcher before it recorded them.
Nothing else a downstream said — raw receipts, free-text details that may quote it — is ever
copied here, so none of it can reach the model as an instruction.
"""

from __future__ import annotations

from intentledger_client.contracts import (TOOL_CALL_AWAITING_APPROVAL, TOOL_CALL_SETTLED,
                                           SettledStatus, ToolCallAwaitingApproval,
                                           ToolCallSettled)

__all__ = ["TOOL_CALL_AWAITING_APPROVAL", "TOOL_CALL_SETTLED", "SettledStatus",
           "ToolCallAwaitingApproval", "ToolCallSettled"]
