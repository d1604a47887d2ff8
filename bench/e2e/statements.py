"""What PostgreSQL executed for the run: statements and commits per settled proposal, and the
statements that ran most often.

Round trips are the pipeline's cost driver (an asyncpg round trip costs tens of microseconds of
client CPU, and as much again in the backend), so the count of statements per proposal is the
figure a change to a handler moves first. It comes from ``pg_stat_statements``, which the local
PostgreSQL preloads (``shared/infra/postgres_local.py``); on a server without it the figures are
``None``. The counters are reset when the run starts: the benchmark's database is its own. The
harness's own sampling queries (a few a second) are included.
"""

from __future__ import annotations

from typing import Any

import asyncpg

TOP = 25


class Statements:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self.pool = pool
        self.available = False
        self.unavailable_reason: str | None = None

    async def start(self) -> None:
        """Enable the extension if the server preloads it, and start counting from zero."""
        try:
            async with self.pool.acquire() as conn:
                await conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
                await conn.execute("SELECT pg_stat_statements_reset()")
            self.available = True
        except asyncpg.PostgresError as error:
            self.unavailable_reason = f"pg_stat_statements unavailable: {error}"

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
        """The ``TOP`` statements by calls, each with its calls per settled proposal."""
        if not self.available:
            return None
        rows = await self.pool.fetch(
            "SELECT calls, total_exec_time, regexp_replace(query, '\\s+', ' ', 'g') AS query"
            " FROM pg_stat_statements ORDER BY calls DESC LIMIT $1", TOP)
        return [{"calls": row["calls"],
                 "per_settled": round(row["calls"] / settled, 2) if settled else None,
                 "exec_ms": round(row["total_exec_time"], 1), "query": row["query"][:160]}
                for row in rows]


def per_settled(first: dict[str, Any], last: dict[str, Any], settled: int) -> dict[str, Any]:
    """Statements and commits per proposal settled between two samples of the timeline."""
    def rate(name: str) -> float | None:
        before, after = first["pg"][name], last["pg"][name]
        if before is None or after is None or not settled:
            return None
        return round((after - before) / settled, 1)

    return {"statements": rate("statements"), "commits": rate("commits")}
