"""What the projection's consumer does with a batch's fresh ledger events, inside the batch's
transaction: ``project`` is set-based, so a batch costs the same few statements as one event."""

from __future__ import annotations

import uuid

from services.projection import results
from services.projection.facts import Delivery
from services.projection.projector import project
from services.projection.reducer import CallRow
from services.projection.repository import SCHEMA
from shared import faults
from shared.db.unit_of_work import UnitOfWork
from shared.errors import RetryableError
from shared.messaging.envelope import Envelope
from shared.topology import results_topic
from shared.tracing import continuing

CRASH_POINT = "projection.after_apply_before_commit"


class ProjectionHandler:
    def __init__(self, results_family: str) -> None:
        self._results_family = results_family

    async def __call__(self, uow: UnitOfWork, deliveries: list[Delivery]) -> set[uuid.UUID]:
        """Returns the ids of the events new to the history (its own inbox: ``main.py``)."""
        def announce(call: CallRow, cause: Envelope) -> None:
            # Only the call's own tenant may read it: its topic, where the intake answered.
            topic = results_topic(call.tenant_id, self._results_family)
            # The announcement continues the trace of the event that brought it about.
            with continuing(cause.traceparent, f"{topic} announce",
                            **{"messaging.message.id": str(cause.event_id)}):
                uow.emit(topic, results.announcement(call, cause))  # same transaction

        fresh = await project(uow.connection, SCHEMA, deliveries, announce)
        try:
            await faults.hit(CRASH_POINT)
        except faults.ResponseDropped as dropped:
            # A lost commit: the whole batch rolls back and is delivered again.
            raise RetryableError(f"injected at {dropped}") from dropped
        return fresh
