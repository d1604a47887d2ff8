"""What the projection's consumer does with a batch's fresh ledger events, inside the batch's
transaction: ``project`` is set-based, so a batch costs the same few statements as one event."""

from __future__ import annotations

import uuid

from services.projection.facts import Delivery
from services.projection.projector import project
from services.projection.repository import SCHEMA
from shared import faults
from shared.db.unit_of_work import UnitOfWork
from shared.errors import RetryableError

CRASH_POINT = "projection.after_apply_before_commit"


async def apply_batch(uow: UnitOfWork, deliveries: list[Delivery]) -> set[uuid.UUID]:
    """Returns the ids of the events new to the history (its own inbox: ``main.py``)."""
    fresh = await project(uow.connection, SCHEMA, deliveries)
    try:
        await faults.hit(CRASH_POINT)
    except faults.ResponseDropped as dropped:
        # A lost commit: the whole batch rolls back and is delivered again.
        raise RetryableError(f"injected at {dropped}") from dropped
    return fresh
