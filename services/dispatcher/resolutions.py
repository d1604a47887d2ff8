"""Operators' resolutions of calls, as the dispatcher records them (``dispatcher.resolutions``):
kept as received, judged by the call's next step under its run's lease (``decide/repair.py``),
concluded applied or refused with a reason.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import asyncpg

from services.dispatcher.repository import SCHEMA
from shared.db.plans import hidden


async def record(conn: asyncpg.Connection, event_id: uuid.UUID,
                 logical_call_id: uuid.UUID, request: dict[str, Any]) -> None:
    await conn.execute(
        f"INSERT INTO {SCHEMA}.resolutions (event_id, logical_call_id, request)"
        " VALUES ($1, $2, $3::jsonb) ON CONFLICT (event_id) DO NOTHING",
        event_id, logical_call_id, json.dumps(request))


PENDING = (f"ARRAY(SELECT ROW(r.logical_call_id, r.event_id, r.request) FROM ("
           f"SELECT logical_call_id, event_id, request, received_at FROM {SCHEMA}.resolutions"
           f" WHERE logical_call_id = ANY({hidden('$1', 'uuid[]')}) AND status = 'pending'"
           " ORDER BY logical_call_id, received_at, event_id FOR UPDATE) AS r"
           " ORDER BY r.logical_call_id, r.received_at, r.event_id)")
"""SQL, an array: the resolutions of the calls ``$1`` not concluded yet, locked, oldest first
per call (``reads.py``)."""


def oldest_pending(rows: list[tuple]) -> dict[uuid.UUID, tuple[uuid.UUID, dict[str, Any]]]:
    """Each call's oldest resolution not yet concluded, from ``PENDING``'s rows."""
    oldest: dict[uuid.UUID, tuple[uuid.UUID, dict[str, Any]]] = {}
    for logical_call_id, event_id, request in rows:
        if logical_call_id not in oldest:
            oldest[logical_call_id] = (event_id, json.loads(request))
    return oldest


async def conclude(conn: asyncpg.Connection, event_id: uuid.UUID, status: str,
                   reason: str | None) -> None:
    await conn.execute(
        f"UPDATE {SCHEMA}.resolutions SET status = $2, reason = $3, concluded_at = now()"
        " WHERE event_id = $1", event_id, status, reason)
