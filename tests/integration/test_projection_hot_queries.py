"""The projection's hot path on a ledger with history: no statement that applying a batch sends
reads a whole table, or walks a run's whole history, so applying does not slow as the ledger
grows. Checked on the plans PostgreSQL chooses for the very statements ``project`` sends, on a
scratch schema holding tens of thousands of calls and their events, analysed as autovacuum
would have it."""

from __future__ import annotations

import asyncpg
import pytest

from services.projection.projector import project
from services.projection.replay import create_scratch, drop_scratch
from shared.contracts.dispatch import RUN_ABORTED
from shared.contracts.intake import PROPOSAL_REJECTED
from tests.support.plans import CUSTOM, Explaining, nodes, overestimated_scans, whole_table_reads
from tests.support.projection_events import RunStory, mixed_runs

pytestmark = pytest.mark.infra

HISTORY_CALLS = 40_000
EVENTS_PER_CALL = 4
WHOLE_RUN_HISTORY = "events_by_run"
"""The index a run's timeline is read through: on the hot path it would walk a run's history."""


async def fill_history(conn: asyncpg.Connection, schema: str) -> None:
    """Settled calls of other runs (ten a run), four events each, one run in fifty aborted."""
    await conn.execute(f"""
        INSERT INTO "{schema}".calls (logical_call_id, run_id, tenant_id, principal_id, state,
                                      version, stage, updated_at, last_event_id)
        SELECT gen_random_uuid(), 'history-' || (g / 10), 'acme', 'agent-7', 'SUCCEEDED', 4, 3,
               now(), gen_random_uuid()
        FROM generate_series(1, {HISTORY_CALLS}) AS g""")
    await conn.execute(f"""
        INSERT INTO "{schema}".events (event_id, topic, event_type, run_id, tenant_id,
                                       logical_call_id, occurred_at, envelope)
        SELECT gen_random_uuid(), 'ledger.dispatch',
               CASE WHEN n = 1 AND c.run_id LIKE '%0' THEN '{RUN_ABORTED}'
                    WHEN n = 2 AND c.run_id LIKE '%5' THEN '{PROPOSAL_REJECTED}'
                    ELSE 'ToolResultRecorded' END,
               c.run_id, c.tenant_id, c.logical_call_id, now(), '{{}}'::jsonb
        FROM "{schema}".calls c, generate_series(1, {EVENTS_PER_CALL}) AS n""")
    await conn.execute(f"""
        INSERT INTO "{schema}".runs (run_id, tenant_id, principal_id, status, calls, updated_at,
                                     projection_hash, reducer_version)
        SELECT run_id, tenant_id, 'agent-7', 'completed', count(*), now(), 'seeded', 'seeded'
        FROM "{schema}".calls GROUP BY run_id, tenant_id""")
    await conn.execute(f'ANALYZE "{schema}".calls, "{schema}".events, "{schema}".runs')


@pytest.fixture
async def scratch(pool):
    schema = await create_scratch(pool)
    async with pool.acquire() as conn:
        await fill_history(conn, schema)
    yield schema
    await drop_scratch(pool, schema)


async def test_applying_a_batch_reads_no_whole_table_and_no_runs_whole_history(pool, scratch):
    runs = [story for story, _ in mixed_runs(4, seed=11)]
    deliveries = [event.delivery for story in runs for event in story.events]
    async with pool.acquire() as conn:
        explaining = Explaining(conn, modes=(CUSTOM,))
        half = len(deliveries) // 2
        for batch in (deliveries[:half], deliveries[half:]):  # the second finds calls stored
            async with conn.transaction():
                assert len(await project(explaining, scratch, batch)) == len(batch)  # type: ignore[arg-type]

    assert explaining.plans, "project sent no statement through the connection it was given"
    found = whole_table_reads(explaining.plans, {"calls", "events", "runs"})
    found += overestimated_scans(explaining.plans, {"calls", "events", "runs"}, HISTORY_CALLS // 100)
    found += [f"walks a run's whole history: {sql[:120]}" for _, sql, plan in explaining.plans
              for node in nodes(plan) if node.get("Index Name") == WHOLE_RUN_HISTORY]
    assert found == []


async def calls_read(conn: asyncpg.Connection, schema: str) -> int:
    """Rows of ``calls`` this session has read so far, by any scan (PostgreSQL's own count)."""
    await conn.execute("SELECT pg_stat_force_next_flush()")
    await conn.execute("SELECT pg_stat_clear_snapshot()")
    return await conn.fetchval(
        "SELECT coalesce(seq_tup_read, 0) + coalesce(idx_tup_fetch, 0) FROM pg_stat_user_tables"
        " WHERE schemaname = $1 AND relname = 'calls'", schema)


async def test_an_event_of_a_long_run_reads_its_own_call_not_the_runs_others(pool):
    """Item 2 of issue 22: the run moves by the call that changed (services/projection/tally.py);
    its other calls are not read again for each event, so a run's events do not cost the
    square of its length. A run of 300 calls, then one more call's events, one per batch."""
    story = RunStory()
    for _ in range(300):
        story.tell("succeeded")
    earlier = len(story.events)
    story.tell("succeeded")
    schema = await create_scratch(pool)
    try:
        async with pool.acquire() as conn:
            async with conn.transaction():
                await project(conn, schema, [event.delivery for event in story.events[:earlier]])
            read = []
            for event in story.events[earlier:]:
                before = await calls_read(conn, schema)
                async with conn.transaction():
                    new = event.delivery.envelope.event_id
                    assert await project(conn, schema, [event.delivery]) == {new}
                read.append(await calls_read(conn, schema) - before)
            run = await conn.fetchrow(f'SELECT calls, status FROM "{schema}".runs')
    finally:
        await drop_scratch(pool, schema)
    assert (run["calls"], run["status"]) == (301, "completed")
    assert len(read) >= 5 and max(read) <= 2, f"rows of calls read per event: {read}"
