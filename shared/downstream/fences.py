"""Fence checks for a downstream system: refuse requests from a worker that lost its lease.

The dispatcher advances a run's fence on every takeover and stamps it on every request. A
resource that remembers the highest fence it has seen per run can refuse a lower one, which is
what makes a paused-then-resumed worker harmless (docs/design.md §5.7). The check and the domain
write belong in one transaction, behind the row lock taken here.

A run is named by its tenant and run id (``shared.runs``): every request carries both
(``tenant_id`` in the request, the run id in its envelope or ``Intentledger-Run-Id``), and the
scope is the pair, so two tenants' runs of one id never share a fence: the takeovers of one
would make the other's requests stale.

DDL (copy it into the service's migration)::

    CREATE TABLE fences (scope text PRIMARY KEY, fence bigint NOT NULL);
"""

from __future__ import annotations

import json

import asyncpg

from shared.db.identifiers import checked_identifier
from shared.runs import RunKey


async def admit(conn: asyncpg.Connection, schema: str, run: RunKey, fence: int) -> bool:
    """Raise the run's remembered fence to ``fence`` if it is not lower; False means stale:
    refuse."""
    table = f'"{checked_identifier(schema)}".fences'
    current = await conn.fetchval(
        f"INSERT INTO {table} (scope, fence) VALUES ($1, $2) ON CONFLICT (scope) DO UPDATE "
        f"SET fence = greatest({table}.fence, EXCLUDED.fence) RETURNING fence", scope(run), fence)
    return current == fence


def scope(run: RunKey) -> str:
    """The fence row's key: the pair as a JSON array (no separator in an id can forge one)."""
    return json.dumps([run.tenant_id, run.run_id], separators=(",", ":"))
