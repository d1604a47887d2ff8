"""The dispatcher's hot path on a ledger with history: no statement a claim or a step sends reads
a whole table, so dispatching does not slow as runs pass (every run leaves its row, its lease
and its calls behind for good). Checked on the plans PostgreSQL chooses, generic and custom,
for the very statements the claim, a batch's reads (the bounded tools' slots included), its
moves' one write and a stretch of receipts' answer send, over thousands of settled runs
analysed as autovacuum would have it, all inside one transaction that is rolled back; and on
the rows those plans expect, which must be few: a plan that is right at this size on a wrong
estimate reads the whole table at a million proposals (a claim that hid its ``now`` from the
planner did). The same for the backlog gauges every replica samples."""

from __future__ import annotations

import uuid

import asyncpg
import pytest

from services.dispatcher import (attempts, capacity, due, leases, moves, reads,
                                 repository as repo)
from shared.contracts.dispatch import CallState
from shared.db.schemas import migrate_service
from shared.runs import RunKey
from tests.support.dispatch import due_calls, unique_suffix
from tests.support.plans import (GENERIC, Explaining, nodes, overestimated_scans, plans_made,
                                 unprepared, whole_table_reads)
from tests.support.transactions import rolled_back

pytestmark = pytest.mark.infra


@pytest.fixture(autouse=True)
async def migrated(pool):
    """Every index this release has: the plans are of this release's schema."""
    await migrate_service(pool, "dispatcher")


HISTORY_RUNS = 4_000
CALLS_PER_RUN = 10
HOT_TABLES = {"calls", "leases", "runs", "attempts", "resolutions"}
FEW = HISTORY_RUNS * CALLS_PER_RUN // 100
"""More rows than a hot statement's scan may expect: a hundredth of the calls (40 are due)."""


async def fill_history(conn: asyncpg.Connection, prefix: str) -> None:
    """Settled runs, each with its lease (expired), ten calls and their attempts; one call in
    a thousand due (as a few always are), one in ten resolved by an operator once."""
    await conn.execute(
        "INSERT INTO dispatcher.runs (run_id, tenant_id, principal_id, deadline_at, max_attempts,"
        " work_until) SELECT $1 || g, 'acme', 'agent-7', now(), 10, now()"
        " FROM generate_series(1, $2::int) AS g", prefix, HISTORY_RUNS)
    await conn.execute(
        "INSERT INTO dispatcher.leases (tenant_id, run_id, owner_id, fence, expires_at)"
        " SELECT 'acme', $1 || g, 'worker-gone', 1, now() - interval '1 hour'"
        " FROM generate_series(1, $2::int) AS g", prefix, HISTORY_RUNS)
    await conn.execute(
        "INSERT INTO dispatcher.calls (logical_call_id, run_id, operation_key, tool_name,"
        " tool_version, arguments_hash, canonical_arguments, principal_id, tenant_id, intent,"
        " capability, policy_version, state, version, deadline_at, next_action_at)"
        " SELECT gen_random_uuid(), $1 || (1 + g % $2::int), $1 || 'key-' || g, 'wallet.debit',"
        " '1', 'x', '{}', 'agent-7', 'acme', '{}', '{}', 'v1', 'SUCCEEDED', 4, now(),"
        " CASE WHEN g % 1000 = 0 THEN now() END"
        " FROM generate_series(1, $3::int) AS g", prefix, HISTORY_RUNS,
        HISTORY_RUNS * CALLS_PER_RUN)
    await conn.execute(
        "INSERT INTO dispatcher.attempts (logical_call_id, attempt, kind, fence, worker_id,"
        " deadline_at, status) SELECT logical_call_id, 1, 'send', 1, 'worker-gone', now(),"
        " 'applied' FROM dispatcher.calls WHERE run_id LIKE $1 || '%'", prefix)
    await conn.execute(
        "INSERT INTO dispatcher.resolutions (event_id, logical_call_id, request, status,"
        " concluded_at) SELECT gen_random_uuid(), logical_call_id, '{}', 'applied', now()"
        " FROM dispatcher.calls WHERE run_id LIKE $1 || '%' AND operation_key LIKE '%0'", prefix)
    await conn.execute("ANALYZE dispatcher.runs, dispatcher.leases, dispatcher.calls,"
                       " dispatcher.attempts, dispatcher.resolutions")


async def sent_batch(conn: asyncpg.Connection) -> list[moves.Moves]:
    """Five new calls of five runs, each moved as an authorization's step moves it (the
    intent, attempt 1, DISPATCHING): a batch's last moves, not yet written."""
    now = await conn.fetchval("SELECT now()")
    batch = []
    for _ in range(5):
        [intent] = await due_calls(conn, f"run-sent-{unique_suffix()}", 1)
        call_moves = moves.Moves(await repo.call_for_update(conn, intent.logical_call_id), 2)
        call_moves.move(CallState.INTENT_RECORDED, next_action_at=now)
        call_moves.start(moves.NewAttempt(1, "send", "worker-a", now))
        call_moves.move(CallState.DISPATCHING, next_action_at=now)
        batch.append(call_moves)
    return batch


async def test_claiming_and_reading_a_batch_reads_no_whole_table(pool):
    prefix = f"history-{uuid.uuid4().hex[:6]}-"
    async with rolled_back(pool) as conn:
        await fill_history(conn, prefix)
        run = RunKey("acme", f"{prefix}due")
        await repo.insert_calls(conn, [], [repo.NewRun(run, "agent-7",
                                                       await conn.fetchval("SELECT now()"), 10)])
        explaining = Explaining(conn)
        now = await conn.fetchval("SELECT clock_timestamp()")
        await due.claim_due(explaining, "worker-a", now, 50)  # type: ignore[arg-type]
        some = [row["logical_call_id"] for row in await conn.fetch(
            "SELECT logical_call_id FROM dispatcher.calls WHERE run_id = $1", f"{prefix}7")]
        await leases.hold(explaining, [run], "worker-a", 10.0, now)  # type: ignore[arg-type]
        await reads.step_reads(explaining, [run], some,  # type: ignore[arg-type]
                               {"wallet.debit": 64})
        await due.waiting_calls_for_update(explaining, some, 10.0)  # type: ignore[arg-type]
        await due.wake_due(explaining, some[:1], some[1:])  # type: ignore[arg-type]
        await capacity.admit(explaining, {"wallet.debit": 64})  # type: ignore[arg-type]
        await moves.write(explaining, await sent_batch(conn))  # type: ignore[arg-type]
        await attempts.answer_receipts(explaining, [(  # type: ignore[arg-type]
            f"{prefix}key-{n}", attempts.Answer(call_id, 1, "applied", "receipt", {}))
            for n, call_id in enumerate(some)])

    assert len({sql for _, sql, _ in explaining.plans}) == 8
    assert whole_table_reads(explaining.plans, HOT_TABLES) == []
    assert overestimated_scans(explaining.plans, HOT_TABLES, FEW) == []


async def test_the_backlog_gauges_read_no_whole_table(pool):
    """Sampled every 5 s by every replica (unknown outcomes, their age, calls awaiting a person,
    calls in line for a bounded tool): they read only the calls in those states, never every
    call there ever was."""
    prefix = f"history-{uuid.uuid4().hex[:6]}-"
    async with rolled_back(pool) as conn:
        await fill_history(conn, prefix)
        await conn.execute("UPDATE dispatcher.calls SET state = CASE operation_key"
                           " WHEN $1 THEN 'UNKNOWN' ELSE 'MANUAL_REVIEW' END"
                           " WHERE operation_key IN ($1, $2)", f"{prefix}key-500",
                           f"{prefix}key-501")
        await conn.execute("UPDATE dispatcher.calls SET capacity = 'waiting'"
                           " WHERE operation_key = $1", f"{prefix}key-502")
        explaining = Explaining(conn)
        unknown, _ = await repo.unresolved(explaining)  # type: ignore[arg-type]
        awaiting = await repo.awaiting_review(explaining)  # type: ignore[arg-type]
        in_line = await capacity.in_line(explaining,  # type: ignore[arg-type]
                                         ["wallet.debit", "wallet.refund"])

    assert unknown >= 1 and awaiting >= 1
    assert in_line["wallet.debit"] >= 1 and in_line["wallet.refund"] == 0
    assert len({sql for _, sql, _ in explaining.plans}) == 3
    assert whole_table_reads(explaining.plans, HOT_TABLES) == []


async def test_a_batch_s_reads_are_planned_once_per_connection(endpoints):
    """After the plan cache's five custom plans, every execution runs the generic plan: the
    keys are hidden from the planner (``shared.db.plans``), which otherwise planned the
    statement afresh each time, for five times what running it cost."""
    prefix = f"planned-{uuid.uuid4().hex[:6]}-"
    async with unprepared(endpoints.database_url) as conn:
        runs = [RunKey("acme", f"{prefix}{n}") for n in range(8)]
        now = await conn.fetchval("SELECT now()")
        await repo.insert_calls(conn, [], [repo.NewRun(run, "agent-7", now, 10) for run in runs])
        for n in range(8):  # batches of one and of two runs, as a consumer's are
            read = await reads.step_reads(conn, runs[n:n + 1 + n % 2], [uuid.uuid4()],
                                          {"wallet.debit": 64})
            assert list(read.runs) == runs[n:n + 1 + n % 2]
        plans = await plans_made(conn, "SELECT ARRAY(SELECT ROW(r.tenant_id, r.run_id%",
                                 "%dispatcher.attempts%")

    assert plans == (5, 3)


async def test_a_batch_s_locks_and_receipts_are_planned_once_per_connection(endpoints):
    """The statement that sets a consumer's step guard and locks the calls its records made due,
    and the one that answers a stretch of receipts, run in every such step; like the batch
    reads, each keeps its generic plan, on a ledger with history."""
    async with unprepared(endpoints.database_url) as conn:
        # At the packaged random_page_cost (4), as a server of one's own may run: there, shown
        # their arrays, PostgreSQL kept planning these afresh (bench/README.md, "Keys, not scans").
        await conn.execute("SET LOCAL random_page_cost = 4")
        await fill_history(conn, f"planned-{uuid.uuid4().hex[:6]}-")
        for n in range(8):  # batches of one and of two calls, as a consumer's are
            now, waiting = await due.waiting_calls_for_update(
                conn, [uuid.uuid4() for _ in range(1 + n % 2)], 10.0)
            assert now is not None and waiting == []
            assert await attempts.answer_receipts(conn, [  # calls nobody holds: nothing answered
                (f"key-{m}", attempts.Answer(uuid.uuid4(), 1, "applied", "receipt", {}))
                for m in range(1 + n % 2)]) == ({}, set())
        plans = [await plans_made(conn, "SELECT guard.now AS guard_now, waiting.*%"),
                 await plans_made(conn, "WITH locked AS MATERIALIZED%")]

    assert plans == [(5, 3)] * 2


async def test_a_batch_s_generic_plan_looks_each_run_up_by_its_key(pool):
    """A plan costed for ten keys without their values may hash a table it thinks small
    rather than look the keys up: at a thousand runs the generic plan read them all on every
    batch. Each run is looked up through its key whatever the planner expects."""
    prefix = f"small-{uuid.uuid4().hex[:6]}-"
    async with rolled_back(pool) as conn:
        await conn.execute(
            "INSERT INTO dispatcher.runs (run_id, tenant_id, principal_id, deadline_at,"
            " max_attempts, work_until) SELECT $1 || g, 'acme', 'agent-7', now(), 10, now()"
            " FROM generate_series(1, 1000) AS g", prefix)
        await conn.execute("ANALYZE dispatcher.runs")
        explaining = Explaining(conn, modes=(GENERIC,))
        await reads.step_reads(explaining, [RunKey("acme", f"{prefix}7")],  # type: ignore[arg-type]
                               [uuid.uuid4()], {})

    [(_, _, plan)] = explaining.plans
    runs = [node for node in nodes(plan) if node.get("Relation Name") == "runs"]
    assert [(node["Node Type"], node["Index Name"]) for node in runs] == [
        ("Index Scan", "runs_pkey")]
