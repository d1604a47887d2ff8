"""The downstream SDK's own rows on a ledger with history (``shared.downstream``): a settled key
and a run's fence per request of the past, which every downstream built on it keeps for good.
The reference downstreams' hot-query tests fill them beside their own tables."""

from __future__ import annotations

import asyncpg


async def settled_keys_and_fences(conn: asyncpg.Connection, schema: str, prefix: str,
                                  count: int) -> None:
    """Keys ``{prefix}key-1`` … with an applied answer, and fence 1 for tenant acme's runs
    ``{prefix}run-1`` …, in ``schema``."""
    await conn.execute(
        f"INSERT INTO {schema}.idempotency_keys (operation_key, request_hash, response)"
        " SELECT $1 || 'key-' || g, 'hash-' || g, '{\"status\": \"applied\"}'"
        " FROM generate_series(1, $2::int) AS g", prefix, count)
    await conn.execute(
        f"INSERT INTO {schema}.fences (scope, fence) SELECT '[\"acme\",\"' || $1 || 'run-' || g"
        " || '\"]', 1 FROM generate_series(1, $2::int) AS g", prefix, count)
