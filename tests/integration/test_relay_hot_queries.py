"""The relay's hot path on an outbox with history: finding outboxes with work, claiming a batch,
marking it published, parking a row of it and the retention purge read no whole outbox, though
the outbox keeps every published row for ``retention_hours`` (72 by default: at 30 proposals a
second, millions of rows). Checked on the plans PostgreSQL chooses, generic and custom, for the
very statements ``claims`` sends, on outboxes of thousands and of tens of thousands of
published rows and a few pending, analysed as autovacuum would have it: a plan can change
with a table's size (a join on positions hashed a whole outbox of 5,000 rows and walked the
index at 40,000)."""

from __future__ import annotations

import asyncpg
import pytest

from services.relay import claims
from tests.support.plans import (Explaining, overestimated_scans, plans_made, unprepared,
                                 whole_table_reads)
from tests.support.probe import Probe

pytestmark = pytest.mark.infra

PENDING_KEYS = 20


async def fill_history(conn: asyncpg.Connection, schema: str, published: int) -> None:
    """Published rows of the last day, then a few pending ones of twenty keys."""
    await conn.execute(
        f'INSERT INTO "{schema}".outbox (event_id, topic, partition_key, headers, envelope, status,'
        " created_at, published_at) SELECT gen_random_uuid(), 't.topic', 'run-' || (g % 4000),"
        " '{}', jsonb_build_object('event_id', g), 'published', now() - interval '1 day',"
        " now() - interval '1 day' + g * interval '1 millisecond'"
        " FROM generate_series(1, $1::int) AS g", published)
    await conn.execute(
        f'INSERT INTO "{schema}".outbox (event_id, topic, partition_key, headers, envelope)'
        " SELECT gen_random_uuid(), 't.topic', 'pending-' || g, '{}', '{}'"
        " FROM generate_series(1, $1::int) AS g", PENDING_KEYS)
    await conn.execute(f'ANALYZE "{schema}".outbox')


@pytest.mark.parametrize("published", [5_000, 40_000])
async def test_claiming_marking_parking_and_purging_read_no_whole_outbox(pool, published):
    probe = await Probe(pool, "t.topic").create()
    try:
        async with pool.acquire() as conn:
            await fill_history(conn, probe.schema, published)
            explaining = Explaining(conn)
            async with conn.transaction():
                assert await claims.outboxes_with_pending_rows(  # type: ignore[arg-type]
                    explaining, [probe.schema]) == [probe.schema]
                claimed = await claims.claim_batch(explaining, probe.schema, 100)  # type: ignore[arg-type]
                await claims.park(  # type: ignore[arg-type]
                    explaining, probe.schema, [claimed[0]["position"]], ["refused"])
                await claims.mark_published(  # type: ignore[arg-type]
                    explaining, probe.schema, [row["position"] for row in claimed[1:]])
            async with conn.transaction():
                purged = await claims.delete_published_before(  # type: ignore[arg-type]
                    explaining, probe.schema, 72.0)
    finally:
        await pool.execute(f'DROP SCHEMA "{probe.schema}" CASCADE')

    assert len(claimed) == PENDING_KEYS and purged == 0
    assert len({sql for _, sql, _ in explaining.plans}) == 5
    assert whole_table_reads(explaining.plans, {"outbox"}) == []
    assert overestimated_scans(explaining.plans, {"outbox"}, published // 100) == []


async def test_marking_a_batch_published_is_planned_once_per_connection(pool, endpoints):
    """Marked once per batch of every outbox; shown the positions, PostgreSQL planned it
    afresh for each batch while a backlog was pending. Hidden (``shared.db.plans``), it keeps
    its generic plan, and it still marks exactly the pending rows it names."""
    probe = await Probe(pool, "t.topic").create()
    try:
        await pool.execute(  # a backlog: the pending rows are no cheaper to read than the keys
            f'INSERT INTO "{probe.schema}".outbox (event_id, topic, partition_key, headers,'
            " envelope) SELECT gen_random_uuid(), 't.topic', 'key-' || g, '{}', '{}'"
            " FROM generate_series(1, 5000) AS g")
        await pool.execute(f'ANALYZE "{probe.schema}".outbox')
        async with unprepared(endpoints.database_url) as conn:
            positions = [row["position"] for row in await conn.fetch(
                f'SELECT position FROM "{probe.schema}".outbox ORDER BY position')]
            marked = [len(await claims.mark_published(conn, probe.schema, positions[:1 + n % 2]
                                                      + positions[n + 4:n + 5]))
                      for n in range(8)]
            plans = await plans_made(conn, f'UPDATE "{probe.schema}".outbox SET status%')
    finally:
        await pool.execute(f'DROP SCHEMA "{probe.schema}" CASCADE')

    assert marked == [2, 2, 1, 1, 1, 1, 1, 1]
    assert plans == (5, 3)
