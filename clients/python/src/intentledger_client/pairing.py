"""A call's outcome in the pairing format of each provider, so an agent loop can take its next
turn: OpenAI Chat Completions (``role: tool``), OpenAI Responses (``function_call_output``) and
Anthropic Messages (``tool_result``).

The model sees data, never instructions: the content is JSON made of the outcome's status,
its stable reason code and the tool's result fields (validated against the tool's result
schema by the dispatcher) and nothing else a downstream said. Where the call has not settled,
the one sentence added is ours, fixed per status: what is happening, and that proposing the
call again under the same operation key is safe.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from intentledger_client.contracts import ToolCallAwaitingApproval
from intentledger_client.outcomes import Outcome
from intentledger_client.routing import UNKNOWN_STATUS

NOTES = {
    "pending": "The call is recorded but has not settled yet. Do not assume it happened or "
               "failed. Proposing it again with the same operation key is safe: it cannot take "
               "effect twice.",
    "awaiting_approval": "The call needs approval by people before it may take effect; nothing "
                         "has happened yet. Tell the user it is waiting for approval (how many "
                         "and until when are in 'approval'). Proposing it again with the same "
                         "operation key is safe: it cannot take effect twice.",
    "needs_review": "A person must review this call before it settles; tell the user it is "
                    "waiting for review. Proposing it again with the same operation key is safe: "
                    "it cannot take effect twice.",
}
"""Ours, for the statuses that are not an answer yet; never text from a tool."""
OPERATION_KEY_IN_USE = "operation_key_in_use"
REASON_NOTES = {
    UNKNOWN_STATUS: "The ledger settled this call in a state this client does not know (a newer "
                    "ledger): whether it took effect is not known. Do not propose it again under "
                    "another operation key; tell the user a person must check it.",
    OPERATION_KEY_IN_USE: "Someone else proposed this same operation (this operation key): "
                          "another agent, or another person through this agent. It takes effect "
                          "once, as theirs, and only they are told what it came to. Do not "
                          "propose it again under another operation key (it could then take "
                          "effect twice); tell the user it is already in hand.",
}
"""Ours, for the reasons whose status alone would mislead a model: "denied" for a call that
may well have taken effect."""


def content(outcome: Outcome) -> str:
    """The outcome as JSON text: what the model reads as the tool's output."""
    shown: dict[str, Any] = {"status": outcome.status}
    if outcome.ledger_status is not None:
        shown["ledger_status"] = outcome.ledger_status
    if outcome.reason_code is not None:
        shown["reason_code"] = outcome.reason_code
    if outcome.result is not None:
        shown["result"] = outcome.result
    if outcome.answer is not None and outcome.answer.retry_after_s is not None \
            and outcome.settled is None:
        shown["retry_after_s"] = outcome.answer.retry_after_s
    if outcome.approval is not None:
        shown["approval"] = approval_shown(outcome.approval)
    if (note := REASON_NOTES.get(outcome.reason_code or "") or NOTES.get(outcome.status)):
        shown["note"] = note
    return json.dumps(shown, sort_keys=True)


def approval_shown(approval: ToolCallAwaitingApproval) -> dict[str, Any]:
    """What a model (or an MCP client) is told of a call awaiting approval: how many approvals,
    by when; never who may approve."""
    return {"approvals_required": approval.approvals_required,
            "expires_at": approval.expires_at.isoformat()}


def is_error(outcome: Outcome) -> bool:
    return outcome.status in ("failed", "denied")


def to_openai_tool_messages(outcomes: Iterable[Outcome]) -> list[dict[str, Any]]:
    """Chat Completions: one ``{"role": "tool", "tool_call_id": ...}`` message per call."""
    return [{"role": "tool", "tool_call_id": o.call_id, "content": content(o)} for o in outcomes]


def to_openai_responses_items(outcomes: Iterable[Outcome]) -> list[dict[str, Any]]:
    """Responses: one ``function_call_output`` input item per ``function_call``'s ``call_id``."""
    return [{"type": "function_call_output", "call_id": o.call_id, "output": content(o)}
            for o in outcomes]


def to_anthropic_tool_results(outcomes: Iterable[Outcome]) -> list[dict[str, Any]]:
    """Messages: ``tool_result`` blocks for the next user turn, failures and denials flagged."""
    return [{"type": "tool_result", "tool_use_id": o.call_id, "content": content(o),
             "is_error": is_error(o)} for o in outcomes]
