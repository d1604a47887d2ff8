"""Operators' cancellations of runs, as the dispatcher records them (``dispatcher.cancellations``).

A cancellation is applied by a step of the run under its lease (``decide/cancel.py``), like a
resolution, so it cannot race the run's own steps: the consumer only records it, checks who
signed it, and wakes one call of the run to take that step. A run none of whose calls has
reached the dispatcher yet has no step to take: it is stopped here, in the consumer's
transaction, and every call of it that arrives later is refused at dispatch.
"""

from __future__ import annotations

import json
import uuid

import asyncpg

from services.dispatcher.repository import SCHEMA
from shared.contracts.cancellations import RunCancellation
from shared.runs import RunKey

NO_CALL_YET = "(no call yet)"
"""The principal of a run cancelled before any of its calls reached the dispatcher."""


async def record(conn: asyncpg.Connection, event_id: uuid.UUID,
                 cancellation: RunCancellation) -> None:
    await conn.execute(
        f"INSERT INTO {SCHEMA}.cancellations (event_id, tenant_id, run_id, request)"
        " VALUES ($1, $2, $3, $4::jsonb) ON CONFLICT (event_id) DO NOTHING",
        event_id, cancellation.tenant_id, cancellation.run_id,
        json.dumps(cancellation.model_dump(mode="json")))


async def conclude(conn: asyncpg.Connection, event_id: uuid.UUID, status: str,
                   reason: str | None) -> None:
    await conn.execute(
        f"UPDATE {SCHEMA}.cancellations SET status = $2, reason = $3, concluded_at = now()"
        " WHERE event_id = $1 AND status = 'pending'", event_id, status, reason)


async def call_to_step(conn: asyncpg.Connection, run: RunKey) -> uuid.UUID | None:
    """The call of ``run`` whose next step applies a cancellation: the latest that still waits
    for a step, else the latest. None: the run has no call here yet, and its row, created if
    need be, is locked (a call arriving meanwhile waits for this transaction, then finds the
    run stopped)."""
    await conn.execute(
        f"INSERT INTO {SCHEMA}.runs (tenant_id, run_id, principal_id, deadline_at, max_attempts,"
        " work_until) VALUES ($1, $2, $3, now(), 0, now()) ON CONFLICT (tenant_id, run_id) DO NOTHING",
        run.tenant_id, run.run_id, NO_CALL_YET)
    await conn.execute(f"SELECT FROM {SCHEMA}.runs WHERE tenant_id = $1 AND run_id = $2"
                       " FOR UPDATE", run.tenant_id, run.run_id)
    return await conn.fetchval(
        f"SELECT logical_call_id FROM {SCHEMA}.calls WHERE tenant_id = $1 AND run_id = $2"
        " ORDER BY next_action_at IS NULL, logical_call_id DESC LIMIT 1",
        run.tenant_id, run.run_id)
