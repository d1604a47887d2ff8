"""Calls that outlast their ``tools/call``: MCP tasks, in the form of the 2026-07-28 tasks
extension (``io.modelcontextprotocol/tasks``, SEP-2663), for clients that declare it.

A call still pending when ``tools/call`` stops waiting (in flight, or awaiting a person's
approval) is answered with a task instead of a pending result; the client polls ``tasks/get``
until it completes, with the same result a settled ``tools/call`` gives (a denied or failed call
completes with an ``isError`` result: the task ran, the tool call was refused).

The task id is the call's handle, encoded: nothing is stored, so any replica answers for any
task and a task is known as soon as its id is returned. It is honoured for the caller's own
tenant only, whose answers its client may read anyway.

``tasks/cancel`` is acknowledged for every task of the caller, as the extension requires
(cancelling is cooperative), and withdraws the call if it awaits approval
(``Calls.withdraw``): once the policy has denied it ``call_withdrawn`` the task is
``cancelled``, and nothing was dispatched. A call already under way is not withdrawn (its effect
may be happening: it settles with its true outcome), nor is a completed one; the
acknowledgement's ``_meta`` says which. Status changes are also pushed to a client that
listens for them (``task_notifications``). The 2025-11-25 form of tasks (``params.task``) is not
offered: the SDK's server checks a ``tools/call`` result on a 2025-11-25 connection against
``CallToolResult`` alone, so such clients get the pending result and its handle.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import mcp_types as types
from intentledger_client import Handle, Outcome
from mcp.shared.exceptions import MCPError

from services.mcp_gateway import results
from services.mcp_gateway.callers import Caller
from services.mcp_gateway.calls import Calls
from shared.contracts.authorizations import PolicyReason

EXTENSION = "io.modelcontextprotocol/tasks"
MISSING_CAPABILITY = -32003
POLL_MS = 1000
TTL_MS = 24 * 3600 * 1000
CANCELLED_BY_CLIENT = "cancelled by the MCP client (tasks/cancel)"
CANCEL_META = "io.intentledger/cancel"
"""Where a ``tasks/cancel`` acknowledgement says what came of it: ``withdrawn``, and if not,
a ``reason_code`` (one of the three below) and a ``message``."""
TASK_ENDED, CALL_UNDER_WAY, WITHDRAWAL_PENDING = (
    "task_ended", "call_under_way", "withdrawal_not_applied_yet")


def wanted(meta: Mapping[str, Any] | None) -> bool:
    """The client declared the extension in this request's capabilities."""
    capabilities = (meta or {}).get(types.CLIENT_CAPABILITIES_META_KEY) or {}
    return isinstance(capabilities, Mapping) and EXTENSION in (capabilities.get("extensions") or {})


def required(meta: Mapping[str, Any] | None) -> None:
    """The extension's rule for its own methods (``tasks/*``, a listen for task ids): a client
    that did not declare it is refused ``-32003``, naming what it lacks."""
    if not wanted(meta):
        raise MCPError(code=MISSING_CAPABILITY, message="Missing required client capability",
                       data={"requiredCapabilities": {"extensions": {EXTENSION: {}}}})


def created(outcome: Outcome) -> dict[str, Any]:
    """``CreateTaskResult``: flat, the task itself."""
    return {"resultType": "task", **_task(outcome, task_id(outcome.handle))}


class Tasks:
    def __init__(self, calls: Calls, poll_wait_s: float = 1.0,
                 cancel_wait_s: float = 20.0) -> None:
        self._calls = calls
        self._poll_wait_s, self._cancel_wait_s = poll_wait_s, cancel_wait_s

    async def get(self, caller: Caller, task: str) -> dict[str, Any]:
        """The task as it is now, under the id it was asked by (the call's handle moves on as
        its states are read; the task's id stays the one the client holds)."""
        return {"resultType": "complete", **detailed(await self._now(caller, task), task)}

    async def cancel(self, caller: Caller, task: str) -> dict[str, Any]:
        """Acknowledge, as the extension requires for any known task (cancelling is
        cooperative), and withdraw the task's call if it awaits approval, answering once the
        policy has denied it; ``_meta`` says whether the call was withdrawn, and why not. The
        call's latest state is read, including the one the task was created in (its id's
        handle waits for later ones); a call read in flight is waited for: it may come to
        await approval."""
        outcome = await self._now(caller, task, self._cancel_wait_s, latest=True)
        if outcome.status not in results.LATER:
            return _acknowledged(TASK_ENDED, f"the task is {_status(outcome)} already")
        if outcome.status != "awaiting_approval":
            return _acknowledged(CALL_UNDER_WAY, (
                f"the call is {outcome.status} ({results.LATER[outcome.status]}): only a call "
                "awaiting approval can be withdrawn; this one settles with its true outcome"))
        decided = await self._calls.withdraw(caller, outcome.handle, CANCELLED_BY_CLIENT,
                                             self._cancel_wait_s)
        if _status(decided) == "cancelled":
            return _acknowledged(None, "withdrawn: the task is cancelled")
        if decided.status in results.LATER:
            return _acknowledged(WITHDRAWAL_PENDING, (
                "the withdrawal is sent but not applied yet: the task shows what it comes to"))
        return _acknowledged(TASK_ENDED, (
            f"the call was decided before its withdrawal: {decided.status} "
            f"({decided.reason_code})"))

    async def _now(self, caller: Caller, task: str, wait_s: float | None = None, *,
                   latest: bool = False) -> Outcome:
        try:
            handle = from_first_state(task) if latest else handle_of(task)
            return await self._calls.fetch(caller, handle, wait_s or self._poll_wait_s)
        except ValueError:  # as pydantic's, base64's and NotTheCallers are
            raise MCPError(code=types.INVALID_PARAMS, message="unknown task") from None


def detailed(outcome: Outcome, task: str) -> dict[str, Any]:
    """The extension's ``DetailedTask``: the task, with its result once it has one (what
    ``tasks/get`` answers and a ``notifications/tasks`` carries)."""
    shown = _task(outcome, task)
    if outcome.status not in results.LATER:
        shown["result"] = results.answer(outcome).model_dump(by_alias=True, mode="json",
                                                             exclude_none=True)
    return shown


def task_id(handle: Handle) -> str:
    return base64.urlsafe_b64encode(handle.model_dump_json().encode()).decode().rstrip("=")


def handle_of(task: str) -> Handle:
    """The call's handle a task id carries; raises ``ValueError`` (pydantic's and base64's
    errors are ones) for anything else."""
    return Handle.model_validate_json(base64.urlsafe_b64decode(task + "=" * (-len(task) % 4)))


def from_first_state(task: str) -> Handle:
    """The task's handle, reading its call's states from the first: the id's handle waits
    only for states after the one the task was created in."""
    return handle_of(task).model_copy(update={"settled_after": -1})


def _task(outcome: Outcome, task: str) -> dict[str, Any]:
    now = datetime.now(UTC)
    return {"taskId": task, "status": _status(outcome),
            "statusMessage": results.LATER.get(outcome.status, outcome.status),
            "createdAt": _created(outcome.handle) or now.isoformat(),
            "lastUpdatedAt": now.isoformat(), "ttlMs": TTL_MS, "pollIntervalMs": POLL_MS}


def _acknowledged(refused: str | None, message: str) -> dict[str, Any]:
    """The extension's empty ``CancelTaskResult``, with what came of it in ``_meta``."""
    came = {"withdrawn": refused is None, "message": message}
    if refused is not None:
        came["reason_code"] = refused
    return {"resultType": "complete", "_meta": {CANCEL_META: came}}


def _status(outcome: Outcome) -> str:
    """The task's status: working while the call may still come to something; cancelled once
    its agent withdrew it; else completed (a denied or failed call is a result, not a failed
    task)."""
    if outcome.status in results.LATER:
        return "working"
    if outcome.status == "denied" and outcome.reason_code == PolicyReason.CALL_WITHDRAWN:
        return "cancelled"
    return "completed"


def _created(handle: Handle) -> str | None:
    """When the intent was named: its logical call id is a UUIDv7, whose first 48 bits are
    milliseconds since the epoch."""
    call = handle.logical_call_id
    if call is None or call.version != 7:
        return None
    return datetime.fromtimestamp(int(call.hex[:12], 16) / 1000, UTC).isoformat()
