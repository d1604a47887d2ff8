"""The policy's set-wise handler: a consumed batch applied in delivery order, each stretch of
consecutive events of one type that has a batch handler (accepted intents: ``decide_all``) in
one call, any other event (an approval, a compensation) on its own through the routing table
in its place, so that what it changes is read by the events after it."""

from __future__ import annotations

from collections.abc import Mapping
from itertools import groupby
from typing import Any

from shared.db.unit_of_work import UnitOfWork
from shared.messaging.consumer import BatchHandler
from shared.messaging.routes import Router


def in_stretches(routes: Router, together: Mapping[str, BatchHandler]) -> BatchHandler:
    async def apply(uow: UnitOfWork, events: list[Any]) -> None:
        for kind, stretch in groupby(events, key=lambda event: event.event_type):
            if kind in together:
                await together[kind](uow, list(stretch))
            else:
                for event in stretch:
                    await routes(uow, event)

    return apply
