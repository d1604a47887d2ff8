"""A batch's reads in one statement (``services/dispatcher/reads.py``), against real
PostgreSQL: its runs with their oldest pending cancellation, locked until the step's
transaction ends; each call's attempts in order with their receipts; the oldest resolution not
yet concluded, locked with the others of its call; and the bounded tools' slots in use and
calls in line."""

import json
import uuid

import asyncpg
import pytest

from services.dispatcher.reads import step_reads
from shared.db.schemas import migrate_service
from shared.runs import RunKey

pytestmark = pytest.mark.infra
TOOL = f"wallet.debit-reads-{uuid.uuid4().hex[:6]}"


@pytest.fixture
async def calls(pool):
    """Two calls of a bounded tool: one with two attempts (the second unanswered), two
    resolutions pending and one concluded; one waiting in line for a slot; their run with two
    cancellations pending and one concluded. Committed, so that another session can try their
    locks; deleted afterwards."""
    await migrate_service(pool, "dispatcher")
    first, second = uuid.uuid4(), uuid.uuid4()
    older, newer, concluded = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    run = f"reads-{uuid.uuid4().hex[:8]}"
    await pool.execute(
        "INSERT INTO dispatcher.runs (run_id, tenant_id, principal_id, deadline_at, max_attempts,"
        " work_until) VALUES ($1, 'acme', 'agent-7', now() + interval '1 hour', 10, now())", run)
    await pool.execute(
        "INSERT INTO dispatcher.calls (logical_call_id, run_id, operation_key, tool_name,"
        " tool_version, arguments_hash, canonical_arguments, principal_id, tenant_id, intent,"
        " capability, policy_version, state, version, deadline_at, capacity)"
        " SELECT id, $1, $1 || '-' || id, $2, '1', 'x', '{}', 'agent-7', 'acme', '{}', '{}',"
        " 'v1', 'UNKNOWN', 1, now() + interval '1 hour', place"
        " FROM unnest($3::uuid[], $4::text[]) AS c(id, place)",
        run, TOOL, [first, second], [None, "waiting"])
    await pool.execute(  # inserted out of order: the read orders them
        "INSERT INTO dispatcher.attempts (logical_call_id, attempt, kind, fence, worker_id,"
        " started_at, deadline_at, status, receipt) VALUES"
        " ($1, 2, 'lookup', 2, 'w', now(), now() + interval '1 minute', NULL, NULL),"
        " ($1, 1, 'send', 1, 'w', now() - interval '1 minute', now() - interval '30 seconds',"
        "  'timeout', $2::jsonb)", first, json.dumps({"status": "timeout", "attempt": 1}))
    await pool.execute(  # the newer one first, too
        "INSERT INTO dispatcher.resolutions (event_id, logical_call_id, request, status,"
        " received_at) VALUES ($1, $4, '{\"n\": \"newer\"}', 'pending', now()),"
        " ($2, $4, '{\"n\": \"older\"}', 'pending', now() - interval '1 minute'),"
        " ($3, $4, '{\"n\": \"concluded\"}', 'applied', now() - interval '2 minutes')",
        newer, older, concluded, first)
    cancellations = [uuid.uuid4() for _ in range(3)]
    await pool.execute(  # the oldest concluded: the oldest pending one is the run's
        "INSERT INTO dispatcher.cancellations (event_id, tenant_id, run_id, request, status,"
        " received_at) SELECT id, 'acme', $1, jsonb_build_object('operator_id', 'op-' || n,"
        " 'reason', 'r', 'compensate', false), status, now() - n * interval '1 minute'"
        " FROM unnest($2::uuid[], $3::text[], $4::int[]) AS c(id, status, n)",
        run, cancellations, ["applied", "pending", "pending"], [3, 2, 1])
    yield {"first": first, "second": second, "older": older, "newer": newer,
           "run": RunKey("acme", run), "cancellation": cancellations[1]}
    await pool.execute("DELETE FROM dispatcher.resolutions WHERE logical_call_id = $1", first)
    await pool.execute("DELETE FROM dispatcher.attempts WHERE logical_call_id = $1", first)
    await pool.execute("DELETE FROM dispatcher.calls WHERE run_id = $1", run)
    await pool.execute("DELETE FROM dispatcher.cancellations WHERE run_id = $1", run)
    await pool.execute("DELETE FROM dispatcher.runs WHERE run_id = $1", run)


async def test_one_statement_reads_runs_attempts_the_oldest_resolution_locked_and_slots(
        pool, endpoints, calls):
    first, second, run = calls["first"], calls["second"], calls["run"]
    async with pool.acquire() as conn, conn.transaction():
        # rows read in the table's order, not an index's: the order must come from the read
        await conn.execute("SET LOCAL enable_indexscan = off; SET LOCAL enable_bitmapscan = off")
        read = await step_reads(conn, [run, RunKey("globex", run.run_id)], [first, second],
                                {TOOL: 1})
        attempts, pending, slots = read.attempts, read.pending, read.slots

        assert list(read.runs) == [run]  # another tenant's run of that id is not this one
        assert (read.runs[run].max_attempts, read.runs[run].cancellation.event_id,
                read.runs[run].cancellation.operator_id) == (10, calls["cancellation"], "op-2")
        assert [a.attempt for a in attempts[first]] == [1, 2]
        assert attempts[first][0].receipt == {"status": "timeout", "attempt": 1}
        assert attempts[first][1].receipt is None and attempts[first][1].status is None
        assert attempts[second] == []
        assert pending == {first: (calls["older"], {"n": "older"})}
        assert slots.in_use[TOOL] == 1  # the unanswered lookup, within its deadline
        assert slots.in_line[TOOL] == 1  # the second call, waiting
        assert not slots.admits(TOOL, None)

        other = await asyncpg.connect(endpoints.database_url)
        try:
            for resolution in (calls["older"], calls["newer"]):
                with pytest.raises(asyncpg.LockNotAvailableError):
                    await other.execute("SELECT FROM dispatcher.resolutions WHERE event_id = $1"
                                        " FOR UPDATE NOWAIT", resolution)
            with pytest.raises(asyncpg.LockNotAvailableError):
                await other.execute("SELECT FROM dispatcher.runs WHERE tenant_id = $1 AND"
                                    " run_id = $2 FOR NO KEY UPDATE NOWAIT", run.tenant_id, run.run_id)
        finally:
            await other.close()


async def test_without_bounded_tools_no_slots_are_read(pool, calls):
    async with pool.acquire() as conn, conn.transaction():
        slots = (await step_reads(conn, [], [calls["first"]], {})).slots
    assert slots.bounds == {} and not slots.in_use and not slots.in_line
