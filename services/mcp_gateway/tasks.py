"""Calls that outlast their ``tools/call``: MCP tasks, in the form of the 2026-07-28 tasks
extension (``io.modelcontextprotocol/tasks``, SEP-2663), for clients that declare it.

A call still pending when ``tools/call`` stops waiting (in flight, or awaiting a person's
approval) is answered with a task instead of a pending result; the client polls ``tasks/get``
until it completes, with the same result a settled ``tools/call`` gives (a denied or failed call
completes with an ``isError`` result: the task ran, the tool call was refused).

The task id is the call's handle, encoded: nothing is stored, so any replica answers for any
task and a task is known as soon as its id is returned. It is honoured for the caller's own
tenant only, whose answers its client may read anyway. An intent cannot be cancelled from here
(it settles, or its deadline expires it): ``tasks/cancel`` says so. The 2025-11-25 form of
tasks (``params.task``) is not offered; such clients get the pending result and its handle.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import mcp_types as types
from intentledger_client import Handle, Outcome
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError

from services.mcp_gateway import results
from services.mcp_gateway.callers import Caller
from services.mcp_gateway.calls import Calls, NotTheCallers

EXTENSION = "io.modelcontextprotocol/tasks"
POLL_MS = 1000
TTL_MS = 24 * 3600 * 1000


def wanted(meta: Mapping[str, Any] | None) -> bool:
    """The client declared the extension in this request's capabilities."""
    capabilities = (meta or {}).get(types.CLIENT_CAPABILITIES_META_KEY) or {}
    return isinstance(capabilities, Mapping) and EXTENSION in (capabilities.get("extensions") or {})


def created(outcome: Outcome) -> dict[str, Any]:
    """``CreateTaskResult``: flat, the task itself."""
    return {"resultType": "task", **_task(outcome, task_id(outcome.handle))}


class Tasks:
    def __init__(self, calls: Calls, poll_wait_s: float = 1.0) -> None:
        self._calls, self._poll_wait_s = calls, poll_wait_s

    async def get(self, caller: Caller, task: str) -> dict[str, Any]:
        """The task as it is now, under the id it was asked by (the call's handle moves on as
        its states are read; the task's id stays the one the client holds)."""
        try:
            outcome = await self._calls.fetch(caller, _handle(task), self._poll_wait_s)
        except (ValueError, ValidationError, NotTheCallers):  # NotTheCallers is a ValueError
            raise MCPError(code=types.INVALID_PARAMS, message="unknown task") from None
        polled = {"resultType": "complete", **_task(outcome, task)}
        if outcome.status not in results.LATER:
            polled["result"] = results.answer(outcome).model_dump(by_alias=True, mode="json",
                                                                  exclude_none=True)
        return polled

    async def cancel(self, caller: Caller, task: str) -> dict[str, Any]:
        raise MCPError(code=types.INVALID_REQUEST, message=(
            "an intent cannot be cancelled: it settles, or its run's deadline expires it"))


def task_id(handle: Handle) -> str:
    return base64.urlsafe_b64encode(handle.model_dump_json().encode()).decode().rstrip("=")


def _handle(task: str) -> Handle:
    return Handle.model_validate_json(base64.urlsafe_b64decode(task + "=" * (-len(task) % 4)))


def _task(outcome: Outcome, task: str) -> dict[str, Any]:
    later = outcome.status in results.LATER
    now = datetime.now(UTC).isoformat()
    return {"taskId": task, "status": "working" if later else "completed",
            "statusMessage": results.LATER.get(outcome.status, outcome.status),
            "createdAt": _created(outcome.handle) or now, "lastUpdatedAt": now,
            "ttlMs": TTL_MS, "pollIntervalMs": POLL_MS}


def _created(handle: Handle) -> str | None:
    """When the intent was named: its logical call id is a UUIDv7, whose first 48 bits are
    milliseconds since the epoch."""
    call = handle.logical_call_id
    if call is None or call.version != 7:
        return None
    return datetime.fromtimestamp(int(call.hex[:12], 16) / 1000, UTC).isoformat()
