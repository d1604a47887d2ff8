"""Fence checks for a downstream system: refuse requests from a worker that lost its lease.

The dispatcher advances a run's fence on every takeover and stamps it on every request. A
resource that remembers the highest fence it has seen per run can refuse a lower one, which is
what makes a paused-then-resumed worker harmless (docs/design.md §5.7). The check and the domain
write belong in one transaction, behind the row lock taken here.

DDL (copy it into the service's migration)::

    CREATE TABLE fences (scope text PRIMARY KEY, fence bigint NOT NULL);
"""

from __future__ import annotations

import asyncpg

from shared.db.identifiers import checked_identifier


async def admit(conn: asyncpg.Connection, schema: str, scope: str, fence: int) -> bool:
    """Raise the remembered fence to ``fence`` if it is not lower; False means stale: refuse."""
    table = f'"{checked_identifier(schema)}".fences'
    current = await conn.fetchval(
        f"INSERT INTO {table} (scope, fence) VALUES ($1, $2) ON CONFLICT (scope) DO UPDATE "
        f"SET fence = greatest({table}.fence, EXCLUDED.fence) RETURNING fence", scope, fence)
    return current == fence
