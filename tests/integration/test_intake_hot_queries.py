"""The intake's hot path on a ledger with history: no statement that taking a batch sends reads
a whole table, so accepting a call does not slow as intents and expired keys pile up (every
intent leaves its record, and every expired one its tombstone, for good). Checked on the plans
PostgreSQL chooses, generic and custom, for the very statements a batch sends (the rate
buckets, the runs locked, the keys and call ids looked up, the one write) and for the key
expiry's sweep, over tens of thousands of intents, analysed as autovacuum would have it; all
inside one transaction that is rolled back."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import asyncpg
import pytest

from services.proposal_intake import expiry, rates, repository as repo
from services.proposal_intake.settings import IntakeSettings
from shared.db.schemas import migrate_service
from shared.runs import RunKey
from tests.support.dispatch import debit_intent
from tests.support.plans import (Explaining, overestimated_scans, plans_made, unprepared,
                                 whole_table_reads)
from tests.support.transactions import rolled_back

pytestmark = pytest.mark.infra


@pytest.fixture(autouse=True)
async def migrated(pool):
    """Every index this release has: the plans are of this release's schema."""
    await migrate_service(pool, "proposal_intake")


HISTORY_RUNS = 4_000
CALLS_PER_RUN = 10
HOT_TABLES = {"runs", "logical_calls", "expired_keys"}
"""The tables that grow with history. ``rate_buckets`` holds a row per principal, not per
call: reading it whole is what a small table costs, and the planner rightly does at times."""


async def fill_history(conn: asyncpg.Connection, prefix: str) -> None:
    """Runs of ten intents each; as many keys again expired to tombstones; a bucket per
    principal of a few hundred."""
    await conn.execute(
        f"INSERT INTO {repo.SCHEMA}.runs (run_id, tenant_id, principal_id, deadline_at, max_calls,"
        " max_attempts, call_count) SELECT $1 || g, 'acme', 'agent-7', now(), 100, 10, 10"
        " FROM generate_series(1, $2::int) AS g", prefix, HISTORY_RUNS)
    await conn.execute(
        f"INSERT INTO {repo.SCHEMA}.logical_calls (logical_call_id, operation_key, run_id, provider,"
        " provider_call_id, tool_name, tool_version, arguments_hash, canonical_arguments,"
        " principal_id, tenant_id, state, version) SELECT gen_random_uuid(), $1 || 'key-' || g,"
        " $1 || (1 + g % $2::int), 'generic', 'call-' || g, 'wallet.debit', '1', 'x', '{}',"
        " 'agent-7', 'acme', 'VALIDATED', 1 FROM generate_series(1, $3::int) AS g",
        prefix, HISTORY_RUNS, HISTORY_RUNS * CALLS_PER_RUN)
    await conn.execute(
        f"INSERT INTO {repo.SCHEMA}.expired_keys (operation_key, logical_call_id, tenant_id, run_id,"
        " tool_name, proposed_at) SELECT $1 || 'gone-' || g, gen_random_uuid(), 'acme',"
        " $1 || (1 + g % $2::int), 'wallet.debit', now() - interval '1 day'"
        " FROM generate_series(1, $3::int) AS g", prefix, HISTORY_RUNS, HISTORY_RUNS * CALLS_PER_RUN)
    await conn.execute(
        f"INSERT INTO {repo.SCHEMA}.rate_buckets (tenant_id, principal_id, tokens, refreshed_at)"
        " SELECT 'acme', $1 || 'agent-' || g, 10, now() FROM generate_series(1, 500) AS g", prefix)
    await conn.execute(f"ANALYZE {repo.SCHEMA}.runs, {repo.SCHEMA}.logical_calls,"
                       f" {repo.SCHEMA}.expired_keys, {repo.SCHEMA}.rate_buckets")


def new_run(run: RunKey) -> dict:
    return {"run_id": run.run_id, "tenant_id": run.tenant_id, "principal_id": "agent-7",
            "deadline_at": datetime.now(UTC) + timedelta(minutes=5), "max_calls": 100,
            "max_attempts": 10, "cost_limit_minor": None, "currency": None, "call_count": 1,
            "cost_spent_minor": 0, "person_id": None, "person_recorded": True}


async def test_taking_a_batch_reads_no_whole_table(pool):
    prefix = f"history-{uuid.uuid4().hex[:6]}-"
    existing, fresh = RunKey("acme", f"{prefix}7"), RunKey("acme", f"{prefix}new")
    intents = [debit_intent("w-1", run_id=existing.run_id), debit_intent("w-1", run_id=fresh.run_id)]
    async with rolled_back(pool) as conn:
        await fill_history(conn, prefix)
        explaining = Explaining(conn)
        spent = await rates.spend_all(  # type: ignore[arg-type]
            explaining, [rates.Spending("acme", f"{prefix}agent-3", 2)], IntakeSettings())
        await repo.runs_and_calls_named(  # type: ignore[arg-type]
            explaining, [existing, fresh],
            [f"{prefix}key-17", f"{prefix}gone-17", intents[0].operation_key],
            [(existing, "call-17"), (fresh, intents[1].provider_call_id)])
        await repo.record_batch(  # type: ignore[arg-type]
            explaining, [new_run(fresh)], intents, {existing: (1, 0)}, spent.written_back(1))
        await expiry.expire_keys(explaining, {"wallet.debit": 86_400}, 100)  # type: ignore[arg-type]

    assert len({sql for _, sql, _ in explaining.plans}) == 4
    assert whole_table_reads(explaining.plans, HOT_TABLES) == []
    assert overestimated_scans(explaining.plans, HOT_TABLES, HISTORY_RUNS * CALLS_PER_RUN // 100) == []


async def test_a_batch_s_runs_and_keys_are_read_with_a_plan_made_once(endpoints):
    """After the plan cache's five custom plans, every batch's read of its runs, keys and call
    ids runs the generic plan: the keys are hidden from the planner (``shared.db.plans``),
    which otherwise planned the statement afresh each time, for more than running it cost."""
    prefix = f"planned-{uuid.uuid4().hex[:6]}-"
    runs = [RunKey("acme", f"{prefix}{n}") for n in range(8)]
    async with unprepared(endpoints.database_url) as conn:
        await repo.create_runs(conn, [new_run(run) for run in runs])
        for n in range(8):  # batches of one and of two runs, as a consumer's are
            batch = runs[n:n + 1 + n % 2]
            found, _ = await repo.runs_and_calls_named(
                conn, batch, [f"{prefix}key-{n}"], [(run, f"call-{n}") for run in batch])
            assert [row["run_id"] for row in found] == [run.run_id for run in batch]
        plans = await plans_made(conn, "SELECT ARRAY(SELECT ROW(r.%",
                                 f"%FROM {repo.SCHEMA}.expired_keys%")

    assert plans == (5, 3)
