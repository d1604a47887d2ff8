"""The policy's hot path on a ledger with history: no statement that deciding a batch, applying
an approval, a cancellation or a withdrawal, or the approval expiry sweep sends reads a whole
table, and a limit's window reads its window, not the tenant's whole history. Checked on the
plans PostgreSQL chooses, generic and custom, for the very statements the repository sends,
over a month of decisions, analysed as autovacuum would have it; all inside one transaction
that is rolled back."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta

import asyncpg
import pytest

from services.policy import cancellations, repository as repo
from shared.db.schemas import migrate_service
from shared.runs import RunKey
from tests.support.dispatch import debit_intent
from tests.support.plans import CUSTOM, Explaining, nodes, overestimated_scans, whole_table_reads
from tests.support.transactions import rolled_back

pytestmark = pytest.mark.infra


@pytest.fixture(autouse=True)
async def migrated(pool):
    """Every index this release has: the plans are of this release's schema."""
    await migrate_service(pool, "policy")


HISTORY_DECISIONS = 40_000
HOT_TABLES = {"decisions", "approvals", "cancelled_runs", "withdrawals"}


async def fill_history(conn: asyncpg.Connection, prefix: str) -> None:
    """A month of decisions of one tenant and principal (each stored with one intent: what is
    read back is parsed, not looked at), ten per run, one in a hundred still
    awaiting approval (its request lapsing at some time of the month), every hundredth with
    two approvals, and as many runs cancelled as there are others."""
    await conn.execute(
        f"INSERT INTO {repo.SCHEMA}.policy_versions (version, document) VALUES ($1, '{{}}')"
        " ON CONFLICT DO NOTHING", f"{prefix}v1")
    await conn.execute(
        f"INSERT INTO {repo.SCHEMA}.decisions (decision_id, logical_call_id, run_id, tenant_id,"
        " principal_id, tool_name, operation_key, arguments_hash, amount_minor, currency, outcome,"
        " policy_version, inputs, issued_at, expires_at)"
        " SELECT gen_random_uuid(), gen_random_uuid(), $1 || (g / 10), 'acme', 'agent-7',"
        " 'wallet.debit', $1 || 'key-' || g, 'x', 100, 'EUR',"
        " CASE WHEN g % 100 = 0 THEN 'awaiting_approval' ELSE 'allowed' END, $1 || 'v1', $3::jsonb,"
        " now() - (interval '30 days') * g / $2::int, now() + (interval '30 days') * g / $2::int"
        " FROM generate_series(1, $2::int) AS g", prefix, HISTORY_DECISIONS,
        json.dumps({"intent": debit_intent("w-1").model_dump(mode="json")}))
    await conn.execute(
        f"INSERT INTO {repo.SCHEMA}.approvals (approval_event_id, logical_call_id, approver_id,"
        " decision, outcome, decided_at, expires_at, payload) SELECT gen_random_uuid(),"
        " d.logical_call_id, 'finance:' || n, 'granted', 'counted', now(), now() + interval '1 hour',"
        " '{}'"
        f" FROM {repo.SCHEMA}.decisions d, generate_series(1, 2) AS n"
        " WHERE d.operation_key LIKE $1 || 'key-%00'", prefix)
    await conn.execute(
        f"INSERT INTO {repo.SCHEMA}.cancelled_runs (tenant_id, run_id, event_id, operator_id,"
        " reason) SELECT 'acme', $1 || g, gen_random_uuid(), 'operator:1', 'stop'"
        " FROM generate_series(1, $2::int) AS g", f"{prefix}cancelled-", HISTORY_DECISIONS // 2)
    await conn.execute(f"ANALYZE {repo.SCHEMA}.decisions, {repo.SCHEMA}.approvals,"
                       f" {repo.SCHEMA}.cancelled_runs")


@pytest.fixture
async def history(pool):
    """A connection inside a transaction that holds the history (rolled back after the test),
    and the history's name prefix."""
    prefix = f"history-{uuid.uuid4().hex[:6]}-"
    async with rolled_back(pool) as conn:
        await fill_history(conn, prefix)
        yield conn, prefix


async def test_deciding_and_concluding_read_no_whole_table(history):
    conn, prefix = history
    call = await conn.fetchval(f"SELECT logical_call_id FROM {repo.SCHEMA}.decisions"
                               " WHERE operation_key = $1", f"{prefix}key-500")
    runs = [RunKey("acme", f"{prefix}50"), RunKey("acme", f"{prefix}new")]
    now = datetime.now(UTC)
    explaining = Explaining(conn)
    # an accepted intent's batch: decided already? the limits' windows, cancelled runs
    await repo.decided(explaining, [call, uuid.uuid4()])  # type: ignore[arg-type]
    await repo.allowed_totals(explaining, windows(now))  # type: ignore[arg-type]
    await cancellations.cancelled(explaining, runs)  # type: ignore[arg-type]
    # an approval or a withdrawal of one call; a cancellation of one run
    await repo.decision_for_update(explaining, call)  # type: ignore[arg-type]
    await repo.counted_grants(explaining, call)  # type: ignore[arg-type]
    await repo.awaiting_of_run_for_update(explaining, "acme", runs[0].run_id)  # type: ignore[arg-type]
    # the approval expiry sweep
    await repo.lapsed_for_update(explaining, now, 100)  # type: ignore[arg-type]

    assert len({sql for _, sql, _ in explaining.plans}) == 7
    assert whole_table_reads(explaining.plans, HOT_TABLES) == []
    assert overestimated_scans(explaining.plans, HOT_TABLES, HISTORY_DECISIONS // 100) == []


async def test_a_limits_window_is_read_through_its_time_by_a_wide_margin(history):
    """A window's bounds come from an array, so the planner cannot see them and guesses that a
    third of the scope's decisions fall in it. Between the index and reading the whole table
    it then chose by a hair (1.2 times in cost on this history), and which one it took
    depended on how bloated the table was. The plan it chooses must beat the whole table's
    read ten times over, however the table is laid out."""
    conn, _ = history
    asked = windows(datetime.now(UTC))
    explaining = Explaining(conn, modes=(CUSTOM,))
    await repo.allowed_totals(explaining, asked)  # type: ignore[arg-type]
    [(_, sql, chosen)] = explaining.plans
    for method in ("indexscan", "indexonlyscan", "bitmapscan"):
        await conn.execute(f"SET LOCAL enable_{method} = off")
    whole = json.loads(await conn.fetchval(f"EXPLAIN (FORMAT JSON) {sql}",
                                           *(list(column) for column in zip(*asked, strict=True))))[0]["Plan"]

    assert whole_table_reads([(CUSTOM, sql, whole)], {"decisions"}), "the comparison is with a whole read"
    assert whole["Total Cost"] >= 10 * chosen["Total Cost"]
    counted = [node for node in nodes(chosen) if node.get("Index Name", "").startswith("decisions_")]
    assert len(counted) == 2 and all("issued_at >" in node["Index Cond"] for node in counted)


def windows(now: datetime) -> list[repo.Window]:
    """A tenant's hourly limit and a principal's per minute, on a month of history."""
    return [("tenant", "acme", now - timedelta(hours=1)),
            ("principal", "agent-7", now - timedelta(minutes=1))]
