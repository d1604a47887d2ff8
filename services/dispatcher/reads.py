"""What a batch's steps read besides the leases and runs they lock: each call's attempts, its
oldest resolution not yet concluded (locked), and the bounded tools' slots, in one statement.

Each is defined where its table is (``attempts.ATTEMPTS``, ``resolutions.PENDING``,
``capacity.SLOTS``); asked for together they cost the consumer's and the scheduler's
transactions one round trip instead of three. At 10 proposals/s a round trip inside a
dispatcher transaction is a few tenths of a millisecond of the proposal's latency, most of it
the wake-ups of two processes, not PostgreSQL's work (bench/README.md, "Where a proposal's
milliseconds go at 10/s").
"""

from __future__ import annotations

import uuid
from typing import Any

import asyncpg

from services.dispatcher import attempts, capacity, resolutions
from services.dispatcher.capacity import Capacity
from services.dispatcher.repository import Attempt


async def step_reads(conn: asyncpg.Connection, call_ids: list[uuid.UUID],
                     bounds: dict[str, int]
                     ) -> tuple[dict[uuid.UUID, list[Attempt]],
                                dict[uuid.UUID, tuple[uuid.UUID, dict[str, Any]]], Capacity]:
    """The calls' attempts (every call has a list), their oldest pending resolutions, and the
    slots of the tools in ``bounds`` (none asked for when it is empty)."""
    row = await conn.fetchrow(
        f"SELECT {attempts.ATTEMPTS} AS attempts, {resolutions.PENDING} AS pending,"
        f" {capacity.SLOTS} AS slots", call_ids, list(bounds))
    return (attempts.attempts_from(row["attempts"], call_ids),
            resolutions.oldest_pending(row["pending"]),
            capacity.capacity_from(bounds, row["slots"]))
