"""Operation keys past their tool's ``ledger_key_retention_seconds`` expire, in bounded batches.

Without this the intake's records grow for ever. An expired record is not simply deleted: a
proposal under its key would then be a new intent and execute again (the double charge the
ledger exists to prevent). It is reduced, in the statement that deletes it, to a tombstone of
its key (``expired_keys``: key, intent id, tenant, run, tool, proposer, when) and a proposal under
the key is refused ``operation_key_expired``, naming the intent to its proposer so its agent can
still read its outcome.
The tombstones are what remains of a tool's history: a few dozen bytes per intent, not its
arguments. A tool that declares no retention, in any of its versions, keeps its records.

Retention counts from the first proposal. It says nothing about the downstream: the dispatcher
never needed the intake's record, and its own reconciliation of a call is bounded by the
tool's ``retry.key_retention_seconds`` (``services/dispatcher/decide/reconcile.py``).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Mapping

import asyncpg

from services.proposal_intake.repository import SCHEMA
from shared import metric_catalog
from shared.db.housekeeping import in_batches
from shared.tools import ToolRegistry

log = logging.getLogger(__name__)
_EXPIRED = metric_catalog.counter("intake.operation_keys_expired")


def retention_by_tool(registry: ToolRegistry) -> dict[str, int]:
    """Seconds per tool name: keys name intents across versions, so a tool's records expire
    only if every version declares a retention, after the longest of them."""
    versions: dict[str, list[int | None]] = {}
    for tool in registry.tools:
        versions.setdefault(tool.name, []).append(tool.ledger_key_retention_seconds)
    return {name: max(seconds) for name, seconds in versions.items()  # type: ignore[type-var]
            if None not in seconds}


async def expire_keys(conn: asyncpg.Connection, retention: Mapping[str, int],
                      limit: int) -> dict[str, int]:
    """Reduce up to ``limit`` records past their retention to tombstones; how many per tool.
    Rows another transaction holds are skipped, not waited for. A key already tombstoned (only
    a record written around the intake's guard could be) keeps its first tombstone rather than
    wedging every later batch on it. Each tool's records are read oldest first through its
    (tool, age) index, so a sweep that finds nothing due reads next to nothing: as a plain join
    the planner read the whole table, every sweep, however little was due."""
    rows = await conn.fetch(
        f"WITH tools AS (SELECT * FROM unnest($1::text[], $2::float8[]) AS t(tool_name, seconds)),"
        " old AS (SELECT o.logical_call_id FROM tools t CROSS JOIN LATERAL ("
        f"  SELECT c.logical_call_id FROM {SCHEMA}.logical_calls c WHERE c.tool_name = t.tool_name"
        "   AND c.created_at < now() - make_interval(secs => t.seconds) ORDER BY c.created_at"
        "   LIMIT $3 FOR UPDATE OF c SKIP LOCKED) AS o LIMIT $3),"
        f" gone AS (DELETE FROM {SCHEMA}.logical_calls c USING old"
        " WHERE c.logical_call_id = old.logical_call_id RETURNING c.operation_key,"
        " c.logical_call_id, c.tenant_id, c.run_id, c.tool_name, c.created_at, c.principal_id,"
        " c.person_id, c.person_recorded)"
        f" INSERT INTO {SCHEMA}.expired_keys (operation_key, logical_call_id, tenant_id, run_id,"
        " tool_name, proposed_at, principal_id, person_id, person_recorded) SELECT * FROM gone"
        " ON CONFLICT (operation_key) DO NOTHING"
        " RETURNING tool_name",
        list(retention), [float(seconds) for seconds in retention.values()], limit)
    return Counter(row["tool_name"] for row in rows)


async def expire_all(pool: asyncpg.Pool, retention: Mapping[str, int], batch: int) -> int:
    """Every record past its retention, a batch per transaction; how many. Counted once each
    batch has committed."""

    async def one_batch(conn: asyncpg.Connection) -> int:
        counted = await expire_keys(conn, retention, batch)
        for tool, count in counted.items():
            _EXPIRED.add(count, {"tool": tool})
        return sum(counted.values())

    if expired := await in_batches(pool, batch, one_batch):
        log.info("intake: %d intents past their retention reduced to key tombstones", expired)
    return expired


def start_at_zero(retention: Mapping[str, int]) -> None:
    """A series per tool born at 0, so ``increase()`` sees the first expiry (once the meter
    provider is installed: the process's telemetry starts before its background tasks)."""
    for tool in retention:
        _EXPIRED.add(0, {"tool": tool})
