"""A service's routing table: the topics it consumes, the event types each may carry, and what
applies each one.

Every consuming service declares one, in its ``routes.py``::

    ROUTES = {LEDGER_INTAKE: {PROPOSAL_ACCEPTED: PolicyHandler.decide,
                              DUPLICATE_PROPOSAL: IGNORED},
              LEDGER_APPROVALS: {APPROVAL_GRANTED: PolicyHandler.on_approval}}

and everything else is derived from it: the topics it subscribes to, the event types it
admits per topic (any other is dead-lettered before a handler sees it: a topic anyone may
write to must not carry a forged event of another kind), and the handler each event reaches.
Topics are named by their topology name (``shared/topology.py``); a deployment or a test may
give a topic another name in the service's settings, and ``Router`` is told the mapping.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import partial
from itertools import groupby
from typing import Any, Generic, TypeVar

from shared.messaging.consumer import Accepts, BatchHandler

Target = TypeVar("Target")
Routes = Mapping[str, Mapping[str, Target | None]]

IGNORED = None
"""An event type the service admits on a topic and has nothing to do with."""


class Router(Generic[Target]):
    """Routes bound to the configured topic names and, when the targets are methods, to the
    ``holder`` whose state they use (every target of the table is then one of its methods)."""

    def __init__(self, routes: Routes, names: Mapping[str, str] | None = None,
                 holder: object | None = None) -> None:
        names = names or {}
        self.table: dict[str, dict[str, Any]] = {
            names.get(topic, topic): {kind: _bound(target, holder)
                                      for kind, target in by_type.items()}
            for topic, by_type in routes.items()}
        if len(self.table) != len(routes):
            raise ValueError(f"two routed topics are configured with one name: {dict(names)}")
        self._by_type: dict[str, Any] = {}
        routed_from: dict[str, str] = {}
        for topic, by_type in self.table.items():
            for kind, target in by_type.items():
                if kind in routed_from:
                    raise ValueError(f"{kind} is routed from two topics ({routed_from[kind]} and "
                                     f"{topic}): one event type, one route")
                routed_from[kind] = topic
                self._by_type[kind] = target

    @property
    def topics(self) -> tuple[str, ...]:
        return tuple(self.table)

    @property
    def accepts(self) -> Accepts:
        return {topic: frozenset(by_type) for topic, by_type in self.table.items()}

    def target(self, event_type: str) -> Target | None:
        """What applies ``event_type``; KeyError for a type no topic admits."""
        return self._by_type[event_type]

    async def __call__(self, uow: Any, event: Any) -> None:
        """The consumer's handler: the consumer admitted ``event`` on its topic already."""
        target = self._by_type[event.event_type]
        if target is not None:
            await target(uow, event)


def _bound(target: Callable[..., Any] | None, holder: object | None) -> Any:
    return target if target is None or holder is None else partial(target, holder)


def in_stretches(routes: Router, together: Mapping[str, BatchHandler]) -> BatchHandler:
    """A set-wise handler that keeps delivery order: each stretch of consecutive events of a
    type in ``together`` goes to its batch handler in one call (a few statements for the
    stretch), any other event through ``routes`` on its own, in its place, so that what it
    changes is read by the events after it."""
    async def apply(uow: Any, events: list[Any]) -> None:
        for kind, stretch in groupby(events, key=lambda event: event.event_type):
            if kind in together:
                await together[kind](uow, list(stretch))
            else:
                for event in stretch:
                    await routes(uow, event)

    return apply
