"""What an MCP client is answered for an outcome (``intentledger_client.Outcome``).

- succeeded: the tool's validated result fields as ``structuredContent``, and their JSON as text
  (for clients that read only text);
- denied, failed: ``isError`` with the reason code first in the text, and in
  ``structuredContent`` with the status, so a model sees why and a program can branch;
- pending, awaiting_approval, needs_review: ``isError`` too, naming the call by its handle
  (and, awaiting approval, how many approvals by when, for the model to tell its user), which the
  ``intentledger.outcome`` tool takes to fetch what it came to. Not an error of the call, but
  no result either: an MCP client validates a successful result against the tool's
  ``outputSchema``, which a pending answer cannot meet, and a model must not read it as done.
"""

from __future__ import annotations

import json
from typing import Any

import mcp_types as types
from intentledger_client import Outcome
from intentledger_client.pairing import approval_shown

LATER = {"pending": "not settled yet (in flight)",
         "awaiting_approval": "awaiting people's approval; nothing has happened yet",
         "needs_review": "awaiting a person's review"}


def answer(outcome: Outcome) -> types.CallToolResult:
    if outcome.status == "succeeded":
        result = outcome.result or {}
        return _result(json.dumps(result, sort_keys=True), result, error=False)
    about: dict[str, Any] = {"status": outcome.status, "reason_code": outcome.reason_code,
                             "ledger_status": outcome.ledger_status}
    if outcome.status in LATER:
        about["handle"] = outcome.handle.model_dump(mode="json")
        if outcome.approval is not None:
            about["approval"] = approval_shown(outcome.approval)
        return _result(f"{outcome.status}: {LATER[outcome.status]}; call intentledger.outcome "
                       f"with this handle for its outcome: {json.dumps(about['handle'])}",
                       about, error=True)
    message = _message(outcome)
    return _result(f"{outcome.status}: {outcome.reason_code}" + (f": {message}" if message else ""),
                   about | {"message": message}, error=True)


def unacknowledged() -> types.CallToolResult:
    """The broker did not acknowledge the proposal in time: whether it was recorded is not
    known, and no handle can tell its answers apart. The same call again, under the same
    operation key, is safe: it is recorded once, or answered as the duplicate it is."""
    return _result("pending: not_acknowledged: the proposal may or may not have been recorded; "
                   "call the tool again with the same operation key (that is safe)",
                   {"status": "pending", "reason_code": "not_acknowledged"}, error=True)


def refused(code: str, message: str) -> types.CallToolResult:
    """A call the gateway refuses before proposing it (an unreadable handle)."""
    return _result(f"denied: {code}: {message}",
                   {"status": "denied", "reason_code": code, "message": message}, error=True)


def _message(outcome: Outcome) -> str | None:
    """The intake's message (a settled state carries its reason code only)."""
    return outcome.answer.message if outcome.answer is not None else None


def _result(text: str, structured: dict[str, Any], *, error: bool) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)],
                                structured_content=structured, is_error=error)
