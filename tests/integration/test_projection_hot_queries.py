"""The projection's hot path on a ledger with history: no statement that applying a batch sends
reads a whole table, or walks a run's whole history, so applying does not slow as the ledger
grows. Checked on the plans PostgreSQL chooses for the very statements ``project`` sends, on a
scratch schema holding tens of thousands of calls and their events, analysed as autovacuum
would have it."""

from __future__ import annotations

import asyncpg
import pytest

from services.projection.facts import Delivery
from services.projection.projector import project
from services.projection.replay import create_scratch, drop_scratch
from shared.contracts.dispatch import RUN_ABORTED
from shared.contracts.intake import PROPOSAL_REJECTED
from shared.topology import LEDGER_AUTHORIZATIONS, LEDGER_DISPATCH, LEDGER_EFFECTS, LEDGER_INTAKE
from tests.support.plans import CUSTOM, Explaining, nodes, whole_table_reads
from tests.support.projection_events import mixed_runs

pytestmark = pytest.mark.infra

TOPIC_OF_ROLE = {"intake": LEDGER_INTAKE, "authorizations": LEDGER_AUTHORIZATIONS,
                 "dispatch": LEDGER_DISPATCH, "effects": LEDGER_EFFECTS}
HISTORY_CALLS = 40_000
EVENTS_PER_CALL = 4
WHOLE_RUN_HISTORY = "events_by_run"
"""The index a run's timeline is read through: on the hot path it would walk a run's history."""


async def fill_history(conn: asyncpg.Connection, schema: str) -> None:
    """Settled calls of other runs, four events each, one run in fifty aborted."""
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
    deliveries = [Delivery(TOPIC_OF_ROLE[event.role], event.envelope)
                  for story in runs for event in story.events]
    async with pool.acquire() as conn:
        explaining = Explaining(conn, modes=(CUSTOM,))
        half = len(deliveries) // 2
        for batch in (deliveries[:half], deliveries[half:]):  # the second finds calls stored
            async with conn.transaction():
                assert await project(explaining, scratch, batch) == len(batch)  # type: ignore[arg-type]

    assert explaining.plans, "project sent no statement through the connection it was given"
    found = whole_table_reads(explaining.plans, {"calls", "events", "runs"})
    found += [f"walks a run's whole history: {sql[:120]}" for _, sql, plan in explaining.plans
              for node in nodes(plan) if node.get("Index Name") == WHOLE_RUN_HISTORY]
    assert found == []
