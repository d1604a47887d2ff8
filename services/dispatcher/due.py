"""When the dispatcher's calls are due: the scheduler's claim, and the wake-ups that make a
call due now (a consumer's fact, an operator's request). A NOTIFY on ``NOTIFY_CHANNEL`` tells
the schedulers at commit; one is sent per transaction at most.
"""

from __future__ import annotations

import uuid
from datetime import datetime

import asyncpg

from services.dispatcher.repository import NOTIFY_CHANNEL, SCHEMA, Call


async def claim_due(conn: asyncpg.Connection, worker_id: str, now: datetime,
                    limit: int) -> list[Call]:
    """Up to ``limit`` due calls, at most one per run, of runs this worker owns, or nobody
    owns, or whose lease has expired, oldest due first; other workers' due calls are skipped,
    not waited for. One call per run: a step may change its run and the run's other calls, so
    each call of a batch is stepped against what it read for itself. Ties (calls woken in one
    transaction share its ``now()``) are broken by call id, so two concurrent claims choose
    the same call of a run, which only one of them can lock, rather than two calls of it whose
    run lease only one of them can hold.

    Each due call's lease is looked up by its key (the LATERAL ... LIMIT 1 keeps PostgreSQL
    from joining the leases table whole: it holds a row for every run there ever was, and a
    hash of it cost more than the rest of the claim once a few thousand runs had passed)."""
    rows = await conn.fetch(
        f"SELECT c.* FROM {SCHEMA}.calls c WHERE c.logical_call_id IN ("
        f"  SELECT DISTINCT ON (d.tenant_id, d.run_id) d.logical_call_id FROM {SCHEMA}.calls d"
        f"  LEFT JOIN LATERAL (SELECT owner_id, expires_at FROM {SCHEMA}.leases l"
        "     WHERE l.tenant_id = d.tenant_id AND l.run_id = d.run_id LIMIT 1) l ON true"
        "   WHERE d.next_action_at <= $2"
        "     AND (l.owner_id IS NULL OR l.owner_id = $1 OR l.expires_at <= $2)"
        "   ORDER BY d.tenant_id, d.run_id, d.next_action_at, d.logical_call_id)"
        " ORDER BY c.next_action_at LIMIT $3 FOR UPDATE OF c SKIP LOCKED", worker_id, now, limit)
    return [Call.of(row) for row in rows]


async def waiting_calls_for_update(conn: asyncpg.Connection,
                                   logical_call_ids: list[uuid.UUID]) -> list[Call]:
    """Those of these calls that wait for a next step (a settled one stays asleep), locked in
    id order."""
    rows = await conn.fetch(f"SELECT * FROM {SCHEMA}.calls WHERE logical_call_id = ANY($1::uuid[])"
                            " AND next_action_at IS NOT NULL ORDER BY logical_call_id FOR UPDATE",
                            sorted(logical_call_ids))
    return [Call.of(row) for row in rows]


async def wake(conn: asyncpg.Connection, logical_call_id: uuid.UUID, *,
               even_if_settled: bool = False) -> None:
    """Make the call due now and wake the schedulers (NOTIFY is delivered at commit). A call
    waiting for nothing stays asleep unless a resolution (``even_if_settled``) concerns it."""
    await conn.execute(f"WITH woken AS (UPDATE {SCHEMA}.calls SET next_action_at = now()"
                       "   WHERE logical_call_id = $1 AND (next_action_at IS NOT NULL OR $2))"
                       f" SELECT pg_notify('{NOTIFY_CHANNEL}', '')",  # one round trip for both
                       logical_call_id, even_if_settled)


async def wake_due(conn: asyncpg.Connection, woken: list[uuid.UUID],
                   stepped: list[uuid.UUID]) -> None:
    """``wake`` the ``woken`` calls; wake the schedulers (one NOTIFY) if any call was woken or
    a ``stepped`` one is due again already (its step left the next one due at once)."""
    await conn.execute(
        f"WITH woken AS (UPDATE {SCHEMA}.calls SET next_action_at = now()"
        "   WHERE logical_call_id = ANY($1::uuid[]) AND next_action_at IS NOT NULL)"
        f" SELECT pg_notify('{NOTIFY_CHANNEL}', '') WHERE cardinality($1::uuid[]) > 0"
        f"   OR EXISTS (SELECT FROM {SCHEMA}.calls WHERE logical_call_id = ANY($2::uuid[])"
        "                AND next_action_at <= clock_timestamp())", woken, stepped)
