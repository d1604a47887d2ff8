"""The relay's SQL: finding work, claiming a shard, and recording what happened to each row.

Per-key order across replicas: every row of one partition key lands in the same ``shard``
(a generated column of the outbox). A worker publishes a shard's rows only while it holds that
shard's transaction-level advisory lock, and it marks a batch published before the lock is
released, so no two workers ever publish rows of one key concurrently, and batches of a shard
go out in ``position`` order. A batch takes rows from as many shards as it can lock: at a
moderate rate each shard has a row or two pending, and a batch per shard would cost a
transaction and a produce request per row. The rows themselves are still claimed ``FOR UPDATE SKIP LOCKED``.
A crash loses the lock and the transaction together: the rows stay pending and are published
again by whoever takes the shard next (at-least-once; consumers dedup by event id).
"""

from __future__ import annotations

import asyncpg

from shared.db.identifiers import checked_identifier
from shared.db.plans import hidden


async def outboxes_with_pending_rows(conn: asyncpg.Connection, schemas: list[str]) -> list[str]:
    """The outboxes, among ``schemas``, with a pending row: one round trip for all of them."""
    if not schemas:
        return []
    probes = " UNION ALL ".join(
        f"""SELECT {index} AS outbox WHERE EXISTS (
                SELECT 1 FROM "{schema}".outbox WHERE status = 'pending')"""
        for index, schema in enumerate(map(checked_identifier, schemas)))
    return [schemas[row["outbox"]] for row in await conn.fetch(probes)]


def shard_lock(schema: str) -> str:
    """The first key of a shard's advisory lock (the shard is the second): one lock space per
    outbox, shared by every relay replica."""
    return f"intentledger.relay.{schema}"


async def claim_batch(conn: asyncpg.Connection, schema: str, limit: int) -> list:
    """Up to ``limit`` pending rows, each shard's in ``position`` order, from shards this
    transaction could lock; shards held by another worker are skipped, not waited for.

    One statement: a loose index scan finds the shards with pending rows (one probe per shard,
    whatever the backlog), visited in random order so replicas spread over them; a shard's
    transaction-level lock is tried only when the batch reaches it, so a full batch leaves the
    remaining shards to others. The consistency checks the relay needs are computed by
    PostgreSQL in C rather than by parsing every envelope in Python."""
    schema = checked_identifier(schema)
    return await conn.fetch(
        f"""WITH RECURSIVE shards AS (
                (SELECT shard FROM "{schema}".outbox WHERE status = 'pending'
                 ORDER BY shard LIMIT 1)
                UNION ALL
                SELECT (SELECT o.shard FROM "{schema}".outbox o
                        WHERE o.status = 'pending' AND o.shard > shards.shard
                        ORDER BY o.shard LIMIT 1)
                FROM shards WHERE shards.shard IS NOT NULL),
            visiting AS MATERIALIZED (
                SELECT shard FROM shards WHERE shard IS NOT NULL ORDER BY random())
            SELECT row.* FROM visiting
            CROSS JOIN LATERAL (
                SELECT pg_try_advisory_xact_lock(hashtext($2), visiting.shard) AS locked) AS lock
            CROSS JOIN LATERAL (
                SELECT position, topic, partition_key,
                       envelope::text AS envelope,
                       headers::text AS headers,
                       jsonb_typeof(envelope) = 'object'
                           AND envelope->>'event_id' = event_id::text
                           AND envelope->>'run_id' = partition_key
                           AND coalesce(envelope->>'event_type', '') <> '' AS envelope_matches_row,
                       jsonb_typeof(headers) = 'object' AS headers_are_object
                FROM "{schema}".outbox
                WHERE lock.locked AND shard = visiting.shard AND status = 'pending'
                ORDER BY position LIMIT $1 FOR UPDATE SKIP LOCKED) AS row
            LIMIT $1""",
        limit, shard_lock(schema),
    )


async def mark_published(conn: asyncpg.Connection, schema: str, positions: list[int]) -> list[float]:
    """Guarded on ``pending`` so a row parked or published meanwhile is left as it is. Planned
    once per connection (``shared.db.plans``).

    Returns each row's publish lag in milliseconds (created → published).
    """
    rows = await conn.fetch(
        f"UPDATE \"{checked_identifier(schema)}\".outbox SET status = 'published', "
        f"published_at = clock_timestamp() WHERE position = ANY({hidden('$1', 'bigint[]')})"
        " AND status = 'pending' "
        "RETURNING extract(epoch FROM published_at - created_at) * 1000 AS lag_ms",
        positions,
    )
    return [float(row["lag_ms"]) for row in rows]


async def park(conn: asyncpg.Connection, schema: str, positions: list[int], reasons: list[str]) -> None:
    await conn.execute(
        f"UPDATE \"{checked_identifier(schema)}\".outbox AS o SET status = 'parked', park_reason = p.reason "
        "FROM unnest($1::bigint[], $2::text[]) AS p(position, reason) "
        "WHERE o.position = p.position AND o.status = 'pending'",
        positions, reasons,
    )


async def backlog(conn: asyncpg.Connection, schema: str) -> int:
    return await conn.fetchval(
        f"SELECT count(*) FROM \"{checked_identifier(schema)}\".outbox WHERE status = 'pending'")


async def delete_published_before(conn: asyncpg.Connection, schema: str, hours: float,
                                  chunk: int = 5000) -> int:
    """Retention in chunks, so a large purge never holds long locks. Parked rows are kept."""
    schema = checked_identifier(schema)
    deleted = 0
    while True:
        result = await conn.execute(
            f'DELETE FROM "{schema}".outbox WHERE position IN ('
            f'SELECT position FROM "{schema}".outbox WHERE status = \'published\' '
            "AND published_at < now() - make_interval(secs => $1) LIMIT $2)",
            hours * 3600.0, chunk,
        )
        count = int(result.split()[-1])
        deleted += count
        if count < chunk:
            return deleted
