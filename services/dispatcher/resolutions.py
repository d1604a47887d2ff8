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


async def record(conn: asyncpg.Connection, event_id: uuid.UUID,
                 logical_call_id: uuid.UUID, request: dict[str, Any]) -> None:
    await conn.execute(
        f"INSERT INTO {SCHEMA}.resolutions (event_id, logical_call_id, request)"
        " VALUES ($1, $2, $3::jsonb) ON CONFLICT (event_id) DO NOTHING",
        event_id, logical_call_id, json.dumps(request))


async def pending(conn: asyncpg.Connection, call_ids: list[uuid.UUID]
                  ) -> dict[uuid.UUID, tuple[uuid.UUID, dict[str, Any]]]:
    """Each call's oldest resolution not yet concluded, locked (with any younger ones)."""
    rows = await conn.fetch(
        f"SELECT logical_call_id, event_id, request FROM {SCHEMA}.resolutions"
        " WHERE logical_call_id = ANY($1::uuid[]) AND status = 'pending'"
        " ORDER BY logical_call_id, received_at, event_id FOR UPDATE", call_ids)
    oldest: dict[uuid.UUID, tuple[uuid.UUID, dict[str, Any]]] = {}
    for row in rows:
        oldest.setdefault(row["logical_call_id"], (row["event_id"], json.loads(row["request"])))
    return oldest


async def conclude(conn: asyncpg.Connection, event_id: uuid.UUID, status: str,
                   reason: str | None) -> None:
    await conn.execute(
        f"UPDATE {SCHEMA}.resolutions SET status = $2, reason = $3, concluded_at = now()"
        " WHERE event_id = $1", event_id, status, reason)
