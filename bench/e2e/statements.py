"""What PostgreSQL executed for the run: statements and commits per settled proposal, and the
statements that ran most often.

Round trips are the pipeline's cost driver (an asyncpg round trip costs tens of microseconds of
client CPU, and as much again in the backend), so the count of statements per proposal is the
figure a change to a handler moves first. It comes from ``pg_stat_statements``, which the local
PostgreSQL preloads (``shared/infra/postgres_local.py``); on a server without it the figures are
``None``. The counters are reset when the run starts: the benchmark's database is its own. The
harness's own sampling queries (a few a second) are included.

Planning is counted too (``pg_stat_statements.track_planning``, set with ALTER SYSTEM for the
run and reset after it, as ``transactions`` sets the statement log): a statement with array
parameters is planned afresh on every execution when its generic plan looks costlier than its
custom ones, and that time is spent in the backend but is not part of the execution time.
Both are wall times inside a backend: on a saturated machine they include waiting for a core
and for row locks, so they bound PostgreSQL's CPU from above (the meter measures it).
"""

from __future__ import annotations

from typing import Any

import asyncpg

from bench.e2e.server_settings import configure

TOP = 25
TRACK_PLANNING = "pg_stat_statements.track_planning"


class Statements:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self.pool = pool
        self.available = False
        self.unavailable_reason: str | None = None
        self.tracks_planning = False

    async def start(self) -> None:
        """Enable the extension if the server preloads it, count planning where this role may
        configure the server, and start counting from zero (the services' sessions see the
        setting once the server has reloaded)."""
        try:
            async with self.pool.acquire() as conn:
                await conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
                try:
                    await configure(conn, {TRACK_PLANNING: "on"})
                    self.tracks_planning = True
                except asyncpg.PostgresError:  # not a superuser: execution is counted alone
                    pass
                await conn.execute("SELECT pg_stat_statements_reset()")
            self.available = True
        except asyncpg.PostgresError as error:
            self.unavailable_reason = f"pg_stat_statements unavailable: {error}"

    async def stop(self) -> str | None:
        """The server's own setting again; a warning when the server could not be told (it is
        away: the run's own error, if any, is the one to report)."""
        if not self.tracks_planning:
            return None
        try:
            async with self.pool.acquire() as conn:
                await configure(conn, {TRACK_PLANNING: None})
        except (asyncpg.PostgresError, OSError) as error:
            return f"{TRACK_PLANNING} left on: {error}"
        self.tracks_planning = False
        return None

    async def counters(self) -> dict[str, int | None]:
        """Statements executed (all of them, top-level and nested) and transactions committed
        in the database so far. Asked every second while the pipeline runs, so without the
        statements' texts: the view reads its whole text file on every query."""
        async with self.pool.acquire() as conn:
            commits = await conn.fetchval(
                "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()")
            statements = await conn.fetchval(
                "SELECT sum(calls)::bigint FROM pg_stat_statements(false)") \
                if self.available else None
        return {"statements": statements, "commits": commits}

    async def most_called(self, settled: int) -> list[dict[str, Any]] | None:
        """The ``TOP`` statements by calls, each with its calls per settled proposal, the time
        PostgreSQL spent executing and planning it, and how many times it was planned."""
        if not self.available:
            return None
        rows = await self.pool.fetch(
            "SELECT calls, plans, total_exec_time, total_plan_time,"
            " regexp_replace(query, '\\s+', ' ', 'g') AS query"
            " FROM pg_stat_statements ORDER BY calls DESC LIMIT $1", TOP)
        return [{"calls": row["calls"],
                 "per_settled": round(row["calls"] / settled, 2) if settled else None,
                 "exec_ms": round(row["total_exec_time"], 1),
                 "plan_ms": round(row["total_plan_time"], 1) if self.tracks_planning else None,
                 "plans": row["plans"] if self.tracks_planning else None,
                 "query": row["query"][:160]}
                for row in rows]

    async def time_spent(self, settled: int) -> dict[str, Any] | None:
        """All statements together, per settled proposal: PostgreSQL's milliseconds executing
        and planning them, and how many plans it made (a statement whose execution failed was
        planned all the same, so this is not a share of the executions)."""
        if not self.available or not settled:
            return None
        row = await self.pool.fetchrow(
            "SELECT sum(plans)::float8 AS plans, sum(total_exec_time) AS exec_ms,"
            " sum(total_plan_time) AS plan_ms FROM pg_stat_statements")
        planned = self.tracks_planning
        return {"exec_ms_per_settled": round(row["exec_ms"] / settled, 2),
                "plan_ms_per_settled": round(row["plan_ms"] / settled, 2) if planned else None,
                "plans_per_settled": round(row["plans"] / settled, 1) if planned else None}


def per_settled(first: dict[str, Any], last: dict[str, Any], settled: int) -> dict[str, Any]:
    """Statements and commits per proposal settled between two samples of the timeline."""
    def rate(name: str) -> float | None:
        before, after = first["pg"][name], last["pg"][name]
        if before is None or after is None or not settled:
            return None
        return round((after - before) / settled, 1)

    return {"statements": rate("statements"), "commits": rate("commits")}
