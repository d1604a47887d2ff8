"""How many tasks one caller's ``subscriptions/listen`` streams follow at once: a task id is
the caller's word, and a made-up one is never answered, so its follower would read the
partition again every ``wait_s`` for as long as the stream stays open. The bound is the
caller's, over all of its streams on the replica (no Kafka: ``Calls`` is a stand-in whose
calls stay pending until released)."""

from __future__ import annotations

import asyncio
import uuid
from types import SimpleNamespace
from typing import Any

import mcp_types as types
from intentledger_client import Handle, Outcome

from services.mcp_gateway import tasks
from services.mcp_gateway.callers import Caller
from services.mcp_gateway.task_notifications import TASK_IDS, TaskNotifications

ALICE, BOB = Caller("desk-agent", "acme", "finance:a"), Caller("desk-agent", "acme", "finance:b")


class PendingCalls:
    """Made-up tasks' calls: never answered, so every fetch waits (until cancelled); but a
    call in ``ended`` is another's, so its follower ends at once (``fetch`` raises)."""

    def __init__(self, *ended: str) -> None:
        self.ended = set(ended)
        self.ended_seen = asyncio.Event()

    async def fetch(self, caller: Caller, handle: Handle, wait: float | None = None) -> Outcome:
        if handle.call_id in self.ended:
            self.ended_seen.set()
            raise ValueError("another principal's call")
        await asyncio.Event().wait()
        raise AssertionError("never answered")


class Stream:
    """A listen request's context: what its session is sent."""

    def __init__(self) -> None:
        self.request_id = uuid.uuid4().hex
        self.acknowledged: asyncio.Future[list[str]] = asyncio.get_running_loop().create_future()
        self.session = SimpleNamespace(send_notification=self._sent)

    async def _sent(self, notification: Any, related_request_id: str) -> None:
        if isinstance(notification, types.SubscriptionsAcknowledgedNotification):
            self.acknowledged.set_result(notification.params.notifications.model_extra[TASK_IDS])


def made_up(count: int, call_id: str | None = None) -> list[str]:
    return [tasks.task_id(Handle(tenant_id="acme", run_id="run-1",
                                 call_id=call_id or f"c-{uuid.uuid4().hex[:8]}",
                                 proposal_id=uuid.uuid4(), partition=0)) for _ in range(count)]


def listening(notifications: TaskNotifications, caller: Caller, ids: list[str]
              ) -> tuple[Stream, asyncio.Task[Any]]:
    stream = Stream()
    params = types.SubscriptionsListenRequestParams(
        notifications=types.SubscriptionFilter(**{TASK_IDS: ids}),
        _meta={types.CLIENT_CAPABILITIES_META_KEY: {"extensions": {tasks.EXTENSION: {}}}})
    return stream, asyncio.ensure_future(notifications.listen(stream, caller, params))  # type: ignore[arg-type]


async def test_a_callers_streams_follow_at_most_its_bound_of_tasks_together() -> None:
    """A caller is a principal and the person behind it: alice and bob are bounded apart. A
    task that ends frees its place while its stream stays open; a closed stream frees all of
    its own."""
    calls = PendingCalls("c-ends")
    notifications = TaskNotifications(calls, wait_s=0.01, max_tasks=4)  # type: ignore[arg-type]
    first, second, third = made_up(2) + made_up(1, "c-ends"), made_up(3), made_up(2)
    alices_first, following_first = listening(notifications, ALICE, first)
    assert await alices_first.acknowledged == first
    await calls.ended_seen.wait()  # its third task ended: two of her four are held
    alices_second, following_second = listening(notifications, ALICE, second)
    assert await alices_second.acknowledged == second[:2], "two left of alice's four"
    bobs, following_bobs = listening(notifications, BOB, third)
    assert await bobs.acknowledged == third, "bob's bound is his own"

    following_first.cancel()  # alice's first stream closes: its tasks are not followed any more
    await asyncio.gather(following_first, return_exceptions=True)
    alices_third, following_third = listening(notifications, ALICE, made_up(5))
    assert len(await alices_third.acknowledged) == 2, "two of four: her second stream holds two"
    for following in (following_second, following_bobs, following_third):
        following.cancel()
    await asyncio.gather(following_second, following_bobs, following_third,
                         return_exceptions=True)
    assert not notifications._following, "nothing is counted once every stream is closed"
