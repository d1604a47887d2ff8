"""Task status notifications: ``notifications/tasks`` on a ``subscriptions/listen`` stream, for
the task ids a client names (``notifications.taskIds``), as the tasks extension defines them.

The stream is the listen request's own response (the SDK's transport streams it even though
every other answer is plain JSON), so it lives on the replica that serves it and needs nothing
stored: each named task is followed through its call's answers, as ``tasks/get`` reads them,
and its ``DetailedTask`` is sent whenever its status changes, the current one first. The
stream ends, gracefully, once every followed task has reached a terminal status; a client
that drops it re-listens (there is no replay, and none is needed: the first frame is the
current state). Only the caller's own tasks are followed; others are left out of the
acknowledgement, as a task of another tenant is unknown to ``tasks/get``. So are tasks past
the caller's bound: a task id is the caller's word, and one made up is never answered, so its
follower reads the partition again, from the offset the id names, every ``wait_s`` until the
stream closes; ``MAX_TASKS`` bounds them per caller on a replica, however many streams it
opens.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Literal

import anyio
import mcp_types as types
from mcp.server import ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp.shared.subscriptions import SUBSCRIPTION_ID_META_KEY
from pydantic import BaseModel

from services.mcp_gateway import tasks
from services.mcp_gateway.callers import Caller
from services.mcp_gateway.calls import Calls

TASK_IDS = "taskIds"
MAX_TASKS = 100
"""Task ids one caller's streams follow at most at once, on one replica: each is a reader of
its run's answers."""


class _TaskStatus(BaseModel):
    """``notifications/tasks``: the extension's, which the SDK's core tables do not list."""

    method: Literal["notifications/tasks"] = "notifications/tasks"
    params: dict[str, Any]


class TaskNotifications:
    def __init__(self, calls: Calls, wait_s: float = 20.0, max_tasks: int = MAX_TASKS) -> None:
        self._calls, self._wait_s, self._max_tasks = calls, wait_s, max_tasks
        self._following: Counter[Caller] = Counter()
        """Tasks followed per caller, over all of its open streams."""

    async def listen(self, ctx: ServerRequestContext, caller: Caller,
                     params: types.SubscriptionsListenRequestParams
                     ) -> types.SubscriptionsListenResult:
        requested = (params.notifications.model_extra or {}).get(TASK_IDS) or []
        if not isinstance(requested, list) or not all(isinstance(t, str) for t in requested):
            raise MCPError(code=types.INVALID_PARAMS, message=f"{TASK_IDS}: a list of task ids")
        if requested:
            tasks.required(params.meta)
        own = [task for task in dict.fromkeys(requested) if _callers(caller, task)]
        followed = own[:max(0, self._max_tasks - self._following[caller])]
        held = set(followed)
        """The followed tasks still counted against the caller's bound: each until it ends."""
        self._following[caller] += len(held)

        async def follow(task: str) -> None:
            try:
                await self._follow(ctx, caller, task, meta)
            finally:
                self._release(caller, held, [task])

        meta = {SUBSCRIPTION_ID_META_KEY: ctx.request_id}
        try:
            await ctx.session.send_notification(types.SubscriptionsAcknowledgedNotification(
                params=types.SubscriptionsAcknowledgedNotificationParams(
                    notifications=types.SubscriptionFilter(**{TASK_IDS: followed}), _meta=meta)),
                related_request_id=ctx.request_id)
            async with anyio.create_task_group() as following:
                for task in followed:
                    following.start_soon(follow, task)
            return types.SubscriptionsListenResult(_meta=meta)
        finally:  # a task never started (the stream closed first) is released here
            self._release(caller, held, list(held))

    def _release(self, caller: Caller, held: set[str], ended: list[str]) -> None:
        for task in ended:
            if task in held:
                held.discard(task)
                self._following[caller] -= 1
        if self._following[caller] <= 0:
            del self._following[caller]

    async def _follow(self, ctx: ServerRequestContext, caller: Caller, task: str,
                      meta: dict[str, Any]) -> None:
        """Send the task's state whenever its status changes, until it is terminal."""
        handle, sent = tasks.from_first_state(task), None
        while True:
            try:
                outcome = await self._calls.fetch(caller, handle, self._wait_s)
            except ValueError:  # another principal's call: not followed, said nothing of
                return
            shown = tasks.detailed(outcome, task)
            if shown["status"] != sent:
                await ctx.session.send_notification(
                    _TaskStatus(params={**shown, "_meta": meta}),  # type: ignore[arg-type]
                    related_request_id=ctx.request_id)
                sent = shown["status"]
            if sent != "working":
                return
            handle = outcome.handle


def _callers(caller: Caller, task: str) -> bool:
    """A task id of the caller's tenant (whose principal ``fetch`` checks)."""
    try:
        return tasks.handle_of(task).tenant_id == caller.tenant_id
    except ValueError:
        return False
