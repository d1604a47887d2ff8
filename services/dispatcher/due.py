"""When the dispatcher's calls are due: the scheduler's claim, and the wake-ups that make a
call due now (a consumer's fact, an operator's request). A NOTIFY on ``NOTIFY_CHANNEL`` tells
the schedulers at commit; one is sent per transaction at most.

A stepping transaction starts by reading its ``now`` and setting its guard (``GUARD``): in the
statement that locks the calls a consumer's records made due, one round trip for both; on its
own before the scheduler's claim (``clock``), which needs ``now`` as a value.
"""

from __future__ import annotations

import uuid
from datetime import datetime

import asyncpg

from services.dispatcher.repository import NOTIFY_CHANNEL, SCHEMA, Call
from shared.db.plans import hidden

GUARD = ("(SELECT clock_timestamp() AS now, set_config('lock_timeout', '5s', true),"
         " set_config('idle_in_transaction_session_timeout', $1, true) OFFSET 0) AS guard")
"""SQL, a one-row relation: the transaction's ``now``, and its guard. A worker paused inside a
step (SIGSTOP, a long GC) must not keep the run's rows locked past its lease, so PostgreSQL
ends the session, the step rolls back, and another worker takes the run over with the next
fence. Time comes from PostgreSQL, not from this host: leases and deadlines are compared by one
clock however many replicas run. In ``waiting_calls_for_update`` the locking part is a LATERAL
subquery that refers to ``guard.now``, so the guard is set before any lock is waited for."""


async def clock(conn: asyncpg.Connection, lease_ttl_s: float) -> datetime:
    """``GUARD`` alone, for the claim. Folded into the claim, ``now`` was a column of the
    guard's row, of a value the planner cannot see: it estimated a third of all calls due and
    read every call on a ledger of a million proposals (seconds a claim); given as a value, the
    due calls are found by their index."""
    return await conn.fetchval(f"SELECT guard.now FROM {GUARD}", _guard(lease_ttl_s))


def _guard(lease_ttl_s: float) -> str:
    return f"{int(lease_ttl_s * 1000)}ms"


def _guarded(rows: list[asyncpg.Record]) -> tuple[datetime, list[Call]]:
    """(now, the calls): with no call locked, the one row is the guard's, the call's columns
    null."""
    return rows[0]["guard_now"], [Call.of(row) for row in rows
                                  if row["logical_call_id"] is not None]


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


async def waiting_calls_for_update(conn: asyncpg.Connection, logical_call_ids: list[uuid.UUID],
                                   lease_ttl_s: float) -> tuple[datetime, list[Call]]:
    """Those of these calls that wait for a next step (a settled one stays asleep), locked in
    id order; with the transaction's ``now`` (``GUARD``). Planned once per connection
    (``shared.db.plans``)."""
    return _guarded(await conn.fetch(
        f"SELECT guard.now AS guard_now, waiting.* FROM {GUARD} LEFT JOIN LATERAL ("
        f" SELECT * FROM {SCHEMA}.calls WHERE logical_call_id = ANY({hidden('$2', 'uuid[]')})"
        "   AND next_action_at IS NOT NULL AND guard.now IS NOT NULL"
        " ORDER BY logical_call_id FOR UPDATE) waiting ON true",
        _guard(lease_ttl_s), sorted(logical_call_ids)))


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
    a ``stepped`` one is due again already (its step left the next one due at once). Planned
    once per connection (``shared.db.plans``)."""
    await conn.execute(
        f"WITH woken AS (UPDATE {SCHEMA}.calls SET next_action_at = now()"
        f"   WHERE logical_call_id = ANY({hidden('$1', 'uuid[]')}) AND next_action_at IS NOT NULL)"
        f" SELECT pg_notify('{NOTIFY_CHANNEL}', '') WHERE cardinality($1::uuid[]) > 0"
        f"   OR EXISTS (SELECT FROM {SCHEMA}.calls WHERE logical_call_id ="
        f"     ANY({hidden('$2', 'uuid[]')}) AND next_action_at <= clock_timestamp())",
        woken, stepped)
