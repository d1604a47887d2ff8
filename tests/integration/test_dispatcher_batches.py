"""The scheduler's batches, on the dispatcher's real tables: one claim takes at most one due call
per run; one statement holds the leases of many runs while honouring another worker's unexpired
lease (and taking over an expired one with the next fence), and skips a lease another batch has
locked instead of waiting for it; concurrent claims never take two calls of one run; the
statement that locks a batch's calls bounds every wait after it, and its own. What happens
when a step fails: ``test_dispatcher_isolation.py``."""

import asyncio
import time
from datetime import timedelta

import asyncpg
import pytest

from services.dispatcher import due, leases
from shared.runs import RunKey
from tests.support.dispatch import dispatcher_stage, due_calls, unique_suffix
from tests.support.transactions import rolled_back

pytestmark = pytest.mark.infra


@pytest.fixture
async def stage(pool, endpoints, tmp_path):
    async with dispatcher_stage(pool, endpoints, tmp_path) as prepared:
        yield prepared


async def test_one_claim_takes_at_most_one_due_call_per_run(stage, pool):
    async with rolled_back(pool) as conn:
        busy = await due_calls(conn, f"run-busy-{unique_suffix()}", 3)
        quiet = await due_calls(conn, f"run-quiet-{unique_suffix()}", 1)
        now = await conn.fetchval("SELECT clock_timestamp()")
        claimed = await due.claim_due(conn, "worker-a", now, 10)
    assert sorted(call.run_id for call in claimed) == sorted({busy[0].run_id, quiet[0].run_id})
    assert {call.logical_call_id for call in claimed} & {i.logical_call_id for i in busy}


async def test_leases_of_many_runs_in_one_statement_respect_an_unexpired_owner(stage, pool):
    mine = RunKey("acme", f"run-mine-{unique_suffix()}")
    theirs = RunKey("acme", f"run-theirs-{unique_suffix()}")
    async with rolled_back(pool) as conn:
        await due_calls(conn, mine.run_id, 1)
        await due_calls(conn, theirs.run_id, 1)
        now = await conn.fetchval("SELECT clock_timestamp()")
        first = await leases.hold(conn, [theirs], "worker-b", 10.0, now)
        held = await leases.hold(conn, [mine, theirs], "worker-a", 10.0, now)
        later = await leases.hold(conn, [theirs], "worker-a", 10.0, now + timedelta(seconds=11))
    assert first[theirs].fence == 1
    assert set(held) == {mine}
    assert (held[mine].fence, held[mine].taken_over_from) == (1, None)
    assert held[mine].expires_at == now + timedelta(seconds=10)
    assert (later[theirs].fence, later[theirs].taken_over_from) == (2, "worker-b")


async def test_a_lease_locked_by_another_batch_is_skipped_not_waited_for(stage, pool):
    """Waiting would hold this batch's own locks meanwhile: the dispatcher's loops would queue
    behind each other (measured: most of a busy dispatcher's statement time)."""
    locked = RunKey("acme", f"run-locked-{unique_suffix()}")
    free = RunKey("acme", f"run-free-{unique_suffix()}")
    async with pool.acquire() as conn:
        await due_calls(conn, locked.run_id, 1)
        await due_calls(conn, free.run_id, 1)
    async with rolled_back(pool) as first, rolled_back(pool) as second:
        now = await first.fetchval("SELECT clock_timestamp()")
        assert set(await leases.hold(first, [locked], "worker-a", 10.0, now)) == {locked}
        held = await asyncio.wait_for(leases.hold(second, [free, locked], "worker-a", 10.0, now), 5)
    assert set(held) == {free}


async def test_two_tenants_runs_of_one_id_have_a_lease_and_a_lock_each(stage, pool):
    """Runs are named by tenant and run id: acme's run being stepped (its lease held, its lock
    taken) neither skips globex's run of that id nor shares its fence."""
    run_id = f"run-shared-{unique_suffix()}"
    acme, globex = RunKey("acme", run_id), RunKey("globex", run_id)
    async with pool.acquire() as conn:
        await due_calls(conn, run_id, 1)
        await due_calls(conn, run_id, 1, tenant="globex")
    async with rolled_back(pool) as first, rolled_back(pool) as second:
        now = await first.fetchval("SELECT clock_timestamp()")
        assert set(await leases.hold(first, [acme], "worker-a", 10.0, now)) == {acme}
        held = await asyncio.wait_for(leases.hold(second, [globex], "worker-b", 10.0, now), 5)
    assert set(held) == {globex} and held[globex].fence == 1


async def test_concurrent_claims_never_take_two_calls_of_one_run(stage, pool):
    """Calls woken together share a due time; both claims must choose the same one of them, which
    only the first can lock, rather than one each (only one of them could hold the run)."""
    run_id = f"run-tied-{unique_suffix()}"
    async with pool.acquire() as conn:
        async with conn.transaction():  # one now(): every call of the run is due at one instant
            await due_calls(conn, run_id, 5)
    async with rolled_back(pool) as first, rolled_back(pool) as second:
        now = await first.fetchval("SELECT clock_timestamp()")
        taken = await due.claim_due(first, "worker-a", now, 10)
        also = await due.claim_due(second, "worker-a", now, 10)
    assert [call.run_id for call in taken] == [run_id]
    assert [call for call in also if call.run_id == run_id] == []


async def test_the_statement_that_locks_a_batch_bounds_its_own_wait_and_the_transactions(stage, pool):
    """A worker paused inside a step must not hold its runs' rows past its lease. The statement
    that locks a batch's calls sets the transaction's lock timeout and idle timeout, and sets
    them before it waits for a lock itself: a call a paused transaction holds is given up on
    after the lock timeout, not waited for for ever."""
    run_id = f"run-guard-{unique_suffix()}"
    async with pool.acquire() as conn:
        async with conn.transaction():
            [intent] = await due_calls(conn, run_id, 1)
    async with rolled_back(pool) as paused, rolled_back(pool) as stepping:
        await paused.execute("SELECT FROM dispatcher.calls WHERE logical_call_id = $1 FOR UPDATE",
                             intent.logical_call_id)
        started = time.monotonic()
        with pytest.raises(asyncpg.LockNotAvailableError):
            await asyncio.wait_for(due.waiting_calls_for_update(
                stepping, [intent.logical_call_id], 0.75), timeout=20)
        assert 4 < time.monotonic() - started < 15  # lock_timeout: 5 s
    async with rolled_back(pool) as conn:
        now = await due.clock(conn, 0.75)
        assert await conn.fetchval("SHOW idle_in_transaction_session_timeout") == "750ms"
        assert await conn.fetchval("SHOW lock_timeout") == "5s"
        assert abs(await conn.fetchval("SELECT clock_timestamp()") - now) < timedelta(seconds=5)
    async with pool.acquire() as conn:
        await conn.execute("UPDATE dispatcher.calls SET next_action_at = NULL"
                           " WHERE logical_call_id = $1", intent.logical_call_id)
