"""Run leases with fencing (docs/design.md §5.7).

A worker acts on a run only inside a transaction that holds the run's lease row locked: it
renews its own lease, or takes over one that has expired, which advances the fence. Work that
spans two transactions (an HTTP call between recording an attempt and recording its outcome)
re-checks in the second that the fence it started with is still the run's; if not, the write
is refused and the refusal itself is recorded in ``stale_writes``.

A lease never outlives the run's deadline for work (the run deadline, extended only by
compensations): ownership is not permission to keep going.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import asyncpg

from services.dispatcher.repository import SCHEMA
from shared.runs import RunKey, run_name_sql


RUN_LOCK = "intentledger.dispatcher.run"
"""The first key of a run's transaction-level advisory lock (the hash of its (tenant, run id)
pair is the second): taken, never waited for, by a batch that holds the run's lease. A hash
collision makes a batch skip a run it could have stepped, never step one it may not."""


@dataclass(frozen=True)
class Lease:
    run: RunKey
    owner_id: str
    fence: int
    expires_at: datetime
    taken_over_from: str | None = None
    """The previous owner when this acquisition advanced the fence."""

    @property
    def run_id(self) -> str:
        return self.run.run_id


async def hold(conn: asyncpg.Connection, runs: list[RunKey], worker_id: str, ttl_s: float,
               now: datetime) -> dict[RunKey, Lease]:
    """Renew or take the leases of these runs, in run order (so two holders cannot deadlock);
    a run whose lease another worker holds, unexpired, is left out of the answer.

    So is a run another batch is stepping (its transaction holds the run's advisory lock,
    ``RUN_LOCK``): waiting for its lease row would hold this batch's own locks meanwhile, and
    the loops of a busy dispatcher would queue behind each other. The run's due call stays due
    and is stepped by the next batch that finds the run free."""
    ordered = sorted(runs)
    rows = await conn.fetch(
        "WITH free AS MATERIALIZED (SELECT tenant_id, run_id"
        "    FROM unnest($1::text[], $6::text[]) AS wanted(tenant_id, run_id)"
        "    WHERE pg_try_advisory_xact_lock(hashtext($5),"
        f"        hashtext({run_name_sql('tenant_id', 'run_id')}))) "
        f"INSERT INTO {SCHEMA}.leases AS l (tenant_id, run_id, owner_id, fence, expires_at) "
        f"SELECT tenant_id, run_id, $2, 1, least($3::timestamptz + make_interval(secs => $4::float8),"
        f"                             greatest(work_until, $3::timestamptz))"
        f"  FROM {SCHEMA}.runs WHERE (tenant_id, run_id) IN (SELECT tenant_id, run_id FROM free)"
        "  ORDER BY tenant_id, run_id "
        "ON CONFLICT (tenant_id, run_id) DO UPDATE SET "
        "  owner_id = EXCLUDED.owner_id,"
        "  fence = CASE WHEN l.owner_id = EXCLUDED.owner_id THEN l.fence ELSE l.fence + 1 END,"
        "  acquired_at = CASE WHEN l.owner_id = EXCLUDED.owner_id THEN l.acquired_at ELSE now() END,"
        "  expires_at = EXCLUDED.expires_at "
        "WHERE l.owner_id = EXCLUDED.owner_id OR l.expires_at <= $3 "
        "RETURNING l.tenant_id, l.run_id, l.fence, l.expires_at, (xmax = 0) AS created, "
        "  (SELECT owner_id FROM " + SCHEMA + ".leases p"
        "   WHERE p.tenant_id = l.tenant_id AND p.run_id = l.run_id) AS previous_owner",
        [run.tenant_id for run in ordered], worker_id, now, ttl_s, RUN_LOCK,
        [run.run_id for run in ordered])
    held = {}
    for row in rows:
        previous = row["previous_owner"]
        taken_over = None if row["created"] or previous == worker_id else previous
        run = RunKey.of(row)
        held[run] = Lease(run, worker_id, row["fence"], row["expires_at"], taken_over)
    return held


async def cover(conn: asyncpg.Connection, lease: Lease, until: datetime) -> None:
    """Keep the lease at least until ``until`` (an HTTP attempt's deadline): a call in flight
    must not look abandoned to another worker while its answer can still come back."""
    await conn.execute(f"UPDATE {SCHEMA}.leases SET expires_at = greatest(expires_at, $4)"
                       " WHERE tenant_id = $1 AND run_id = $2 AND fence = $3",
                       lease.run.tenant_id, lease.run.run_id, lease.fence, until)


async def still_holds(conn: asyncpg.Connection, lease: Lease) -> int | None:
    """Lock the lease row; return None if ``lease`` is still the run's, else the current fence."""
    row = await conn.fetchrow(f"SELECT owner_id, fence FROM {SCHEMA}.leases"
                              " WHERE tenant_id = $1 AND run_id = $2 FOR UPDATE",
                              lease.run.tenant_id, lease.run.run_id)
    if row["owner_id"] == lease.owner_id and row["fence"] == lease.fence:
        return None
    return row["fence"]


async def record_stale_write(pool: asyncpg.Pool, lease: Lease, current_fence: int | None,
                             action: str) -> None:
    async with pool.acquire() as conn:
        await conn.execute(
            f"INSERT INTO {SCHEMA}.stale_writes (tenant_id, run_id, worker_id, held_fence,"
            " current_fence, action) VALUES ($1, $2, $3, $4, $5, $6)",
            lease.run.tenant_id, lease.run.run_id, lease.owner_id, lease.fence, current_fence,
            action)
