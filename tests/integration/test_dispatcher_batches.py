"""The scheduler's batches, on the dispatcher's real tables: one claim takes at most one due call
per run; one statement holds the leases of many runs while honouring another worker's unexpired
lease (and taking over an expired one with the next fence), and skips a lease another batch has
locked instead of waiting for it; concurrent claims never take two calls of one run; the
statement that locks a batch's calls bounds every wait after it, and its own; a step
that fails is isolated and the rest of its batch commits once, and a call whose steps keep
failing waits ever longer."""

import asyncio
import time
import uuid
from datetime import timedelta
from types import SimpleNamespace

import asyncpg
import pytest

from services.dispatcher import due, leases, repository as repo
from services.dispatcher.adapters.http import HttpEffectAdapter
from services.dispatcher.batch import Batch
from services.dispatcher.breaker import Breakers
from services.dispatcher.finishing import Finishing
from services.dispatcher.metrics import STEP_FAILURE, DispatcherMetrics
from services.dispatcher.scheduler import Scheduler
from services.dispatcher.steps import StepReport
from shared.db.unit_of_work import UnitOfWork
from shared.errors import PermanentError
from shared.messaging.envelope import Envelope
from shared.runs import RunKey
from tests.support.dispatch import debit_intent, dispatcher_stage
from tests.support.transactions import rolled_back

pytestmark = pytest.mark.infra


@pytest.fixture
async def stage(pool, endpoints, tmp_path):
    async with dispatcher_stage(pool, endpoints, tmp_path) as prepared:
        yield prepared


def _unique() -> str:
    """Run ids of this test run only: a rerun on the same database must not find the leases
    (and fences) an earlier run of the same test left behind."""
    return uuid.uuid4().hex[:10]


async def _due_calls(conn, run_id: str, count: int, tenant: str = "acme") -> list:
    intents = [debit_intent("w-batch", run_id=run_id).model_copy(update={"tenant_id": tenant})
               for _ in range(count)]
    await repo.insert_calls(
        conn, [repo.NewCall(intent.model_dump(mode="json"), None, "v1", intent.deadline_at)
               for intent in intents],
        [repo.NewRun(RunKey(tenant, run_id), "agent-7", intents[0].deadline_at, 10)])
    return intents


async def test_one_claim_takes_at_most_one_due_call_per_run(stage, pool):
    async with rolled_back(pool) as conn:
        busy = await _due_calls(conn, f"run-busy-{_unique()}", 3)
        quiet = await _due_calls(conn, f"run-quiet-{_unique()}", 1)
        now = await conn.fetchval("SELECT clock_timestamp()")
        claimed = await due.claim_due(conn, "worker-a", now, 10)
    assert sorted(call.run_id for call in claimed) == sorted({busy[0].run_id, quiet[0].run_id})
    assert {call.logical_call_id for call in claimed} & {i.logical_call_id for i in busy}


async def test_leases_of_many_runs_in_one_statement_respect_an_unexpired_owner(stage, pool):
    mine = RunKey("acme", f"run-mine-{_unique()}")
    theirs = RunKey("acme", f"run-theirs-{_unique()}")
    async with rolled_back(pool) as conn:
        await _due_calls(conn, mine.run_id, 1)
        await _due_calls(conn, theirs.run_id, 1)
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
    locked = RunKey("acme", f"run-locked-{_unique()}")
    free = RunKey("acme", f"run-free-{_unique()}")
    async with pool.acquire() as conn:
        await _due_calls(conn, locked.run_id, 1)
        await _due_calls(conn, free.run_id, 1)
    async with rolled_back(pool) as first, rolled_back(pool) as second:
        now = await first.fetchval("SELECT clock_timestamp()")
        assert set(await leases.hold(first, [locked], "worker-a", 10.0, now)) == {locked}
        held = await asyncio.wait_for(leases.hold(second, [free, locked], "worker-a", 10.0, now), 5)
    assert set(held) == {free}


async def test_two_tenants_runs_of_one_id_have_a_lease_and_a_lock_each(stage, pool):
    """Runs are named by tenant and run id: acme's run being stepped (its lease held, its lock
    taken) neither skips globex's run of that id nor shares its fence."""
    run_id = f"run-shared-{_unique()}"
    acme, globex = RunKey("acme", run_id), RunKey("globex", run_id)
    async with pool.acquire() as conn:
        await _due_calls(conn, run_id, 1)
        await _due_calls(conn, run_id, 1, tenant="globex")
    async with rolled_back(pool) as first, rolled_back(pool) as second:
        now = await first.fetchval("SELECT clock_timestamp()")
        assert set(await leases.hold(first, [acme], "worker-a", 10.0, now)) == {acme}
        held = await asyncio.wait_for(leases.hold(second, [globex], "worker-b", 10.0, now), 5)
    assert set(held) == {globex} and held[globex].fence == 1


async def test_concurrent_claims_never_take_two_calls_of_one_run(stage, pool):
    """Calls woken together share a due time; both claims must choose the same one of them, which
    only the first can lock, rather than one each (only one of them could hold the run)."""
    run_id = f"run-tied-{_unique()}"
    async with pool.acquire() as conn:
        async with conn.transaction():  # one now(): every call of the run is due at one instant
            await _due_calls(conn, run_id, 5)
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
    run_id = f"run-guard-{_unique()}"
    async with pool.acquire() as conn:
        async with conn.transaction():
            [intent] = await _due_calls(conn, run_id, 1)
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


class _StepperFailingOn:
    """Steps a call by taking it off the schedule and emitting one event; refuses one call."""

    def __init__(self, bad) -> None:
        self.bad = bad
        self.seen: list = []

    async def step(self, uow, call, lease, now, known):
        self.seen.append(call.logical_call_id)
        if call.logical_call_id == self.bad:
            raise PermanentError("this call's step is broken")
        await repo.postpone(uow.connection, call, None)
        uow.emit("t.batch-steps", Envelope.new(event_type="Stepped", run_id=call.run_id,
                                               producer="test", payload={}))
        return StepReport([], [])

    def tool_of(self, call):
        return None  # no tool of its calls is bounded (``capacity.py``)


async def test_a_failing_step_is_isolated_and_the_rest_of_its_batch_commits_once(stage, pool):
    good_run, bad_run = f"run-good-{_unique()}", f"run-bad-{_unique()}"
    async with pool.acquire() as conn, conn.transaction():
        [good] = await _due_calls(conn, good_run, 1)
        [bad] = await _due_calls(conn, bad_run, 1)
    stepper = _StepperFailingOn(bad.logical_call_id)
    settings = stage.dispatcher_settings()
    scheduler = Scheduler(pool, Batch(stepper, settings), Breakers(5, timedelta(seconds=5)),
                          HttpEffectAdapter(), settings, DispatcherMetrics())
    try:
        before = await pool.fetchval("SELECT clock_timestamp()")
        assert await scheduler.step_batch() == 2
        after = await pool.fetchval("SELECT clock_timestamp()")
        assert stepper.seen.count(bad.logical_call_id) == 2  # the batch, then alone
        rows = await pool.fetch(
            "SELECT logical_call_id, state, next_action_at FROM dispatcher.calls"
            " WHERE run_id = ANY($1::text[])", [good_run, bad_run])
        by_call = {row["logical_call_id"]: row for row in rows}
        assert by_call[good.logical_call_id]["next_action_at"] is None
        assert by_call[bad.logical_call_id]["state"] == "AUTHORIZED"
        # retried a second after its failure, which happened while step_batch ran
        retry_at = by_call[bad.logical_call_id]["next_action_at"]
        assert before < retry_at <= after + timedelta(seconds=1)
        assert await pool.fetchval("SELECT count(*) FROM dispatcher.outbox WHERE topic ="
                                   " 't.batch-steps' AND partition_key = $1", good_run) == 1
        assert await pool.fetchval("SELECT count(*) FROM dispatcher.outbox WHERE topic ="
                                   " 't.batch-steps' AND partition_key = $1", bad_run) == 0
    finally:
        await pool.execute("DELETE FROM dispatcher.outbox WHERE topic = 't.batch-steps'")
        await pool.execute("UPDATE dispatcher.calls SET next_action_at = NULL"
                           " WHERE run_id = ANY($1::text[])", [good_run, bad_run])


async def test_a_call_that_keeps_failing_waits_ever_longer_and_is_counted(stage, pool):
    """A call no step can take was retried every second for ever, a traceback each time (a
    benchmark on a database holding such a row burned 150 CPU-seconds on it). Now each
    consecutive failure doubles the wait, every one is counted, and a step that succeeds
    starts the count over."""
    run_id = f"run-poison-{_unique()}"
    async with pool.acquire() as conn, conn.transaction():
        [bad] = await _due_calls(conn, run_id, 1)
    stepper = _StepperFailingOn(bad.logical_call_id)
    settings, counted = stage.dispatcher_settings(), DispatcherMetrics()
    scheduler = Scheduler(pool, Batch(stepper, settings), Breakers(5, timedelta(seconds=5)),
                          HttpEffectAdapter(), settings, counted)

    async def waits_after_a_step() -> float:
        await pool.execute("UPDATE dispatcher.calls SET next_action_at = now()"
                           " WHERE logical_call_id = $1", bad.logical_call_id)
        before = await pool.fetchval("SELECT clock_timestamp()")
        assert await scheduler.step_batch() == 1
        retry_at = await pool.fetchval("SELECT next_action_at FROM dispatcher.calls"
                                       " WHERE logical_call_id = $1", bad.logical_call_id)
        return 0.0 if retry_at is None else (retry_at - before).total_seconds()

    try:
        waits = [await waits_after_a_step() for _ in range(4)]
        assert [round(wait) for wait in waits] == [1, 2, 4, 8]
        assert counted.counts[STEP_FAILURE] == 4
        stepper.bad = None  # mended: it steps, and a later failure waits a second again
        assert await waits_after_a_step() == 0.0
        stepper.bad = bad.logical_call_id
        assert round(await waits_after_a_step()) == 1
        assert counted.counts[STEP_FAILURE] == 5
    finally:
        await pool.execute("DELETE FROM dispatcher.outbox WHERE topic = 't.batch-steps'")
        await pool.execute("UPDATE dispatcher.calls SET next_action_at = NULL WHERE run_id = $1",
                           run_id)


async def test_a_consumer_steps_one_call_per_free_run_of_kafka_tools_and_wakes_the_rest(stage,
                                                                                       pool):
    """What a consumer's batch made due is stepped in its transaction (finishing.py), but only
    where that cannot wait on a downstream or race another step: one call per run, Kafka tools
    only, runs nobody else holds. The rest is woken for the scheduler (due now, a NOTIFY)."""
    name = uuid.uuid4().hex[:8]  # a run's lease must not outlive its work: fresh runs
    async with pool.acquire() as conn:
        two = await _due_calls(conn, f"run-two-{name}", 2)
        [held] = await _due_calls(conn, f"run-held-{name}", 1)
        [http] = await _due_calls(conn, f"run-http-{name}", 1)
        now = await conn.fetchval("SELECT clock_timestamp()")
        await leases.hold(conn, [RunKey("acme", held.run_id)], "worker-b", 60.0, now)
        await conn.execute("UPDATE dispatcher.calls SET next_action_at = now() + interval '1 hour'"
                           " WHERE run_id = ANY($1::text[])",
                           [two[0].run_id, held.run_id, http.run_id])
    woken_ids = [intent.logical_call_id for intent in (*two, held, http)]
    adapters = {call_id: "http" if call_id == http.logical_call_id else "kafka"
                for call_id in woken_ids}
    stepper = _StepperFailingOn(bad=None)
    counted = DispatcherMetrics()
    finishing = Finishing(Batch(stepper, stage.dispatcher_settings(worker_id="worker-a")),
                          lambda call: SimpleNamespace(adapter=adapters[call.logical_call_id]),
                          counted)
    notified = asyncio.Event()

    def heard(*_) -> None:
        notified.set()

    async with pool.acquire() as listening:
        await listening.add_listener(repo.NOTIFY_CHANNEL, heard)
        try:
            async with UnitOfWork(pool, repo.SCHEMA) as uow:
                for call_id in woken_ids:
                    finishing.step_before_commit(uow, call_id)
                    finishing.step_before_commit(uow, call_id)  # twice: stepped once
                assert stepper.seen == []  # once the batch's records are all applied
                await uow.commit()
            await asyncio.wait_for(notified.wait(), 5)
        finally:
            await listening.remove_listener(repo.NOTIFY_CHANNEL, heard)
    [stepped] = stepper.seen
    assert stepped in {two[0].logical_call_id, two[1].logical_call_id}
    rows = await pool.fetch("SELECT logical_call_id, next_action_at <= clock_timestamp() AS due,"
                            " next_action_at IS NULL AS done FROM dispatcher.calls"
                            " WHERE logical_call_id = ANY($1)", woken_ids)
    by_call = {row["logical_call_id"]: row for row in rows}
    assert by_call[stepped]["done"]
    assert all(by_call[call_id]["due"] for call_id in woken_ids if call_id != stepped)
    await pool.execute("DELETE FROM dispatcher.outbox WHERE topic = 't.batch-steps'")
    await pool.execute("UPDATE dispatcher.calls SET next_action_at = NULL"
                       " WHERE logical_call_id = ANY($1)", woken_ids)


async def test_a_step_failing_in_a_consumers_transaction_hands_its_calls_to_the_scheduler(stage,
                                                                                          pool):
    """A broken step aborts the consumer's transaction (nothing of the batch commits); the
    consumer then applies the batch again, and this time the calls are woken for the scheduler,
    which steps a failing call alone, instead of failing the batch a second time."""
    name = uuid.uuid4().hex[:8]
    async with pool.acquire() as conn:
        [good] = await _due_calls(conn, f"run-good-{name}", 1)
        [bad] = await _due_calls(conn, f"run-bad-{name}", 1)
    ids = [good.logical_call_id, bad.logical_call_id]
    stepper = _StepperFailingOn(bad.logical_call_id)
    finishing = Finishing(Batch(stepper, stage.dispatcher_settings()),
                          lambda call: SimpleNamespace(adapter="kafka"), DispatcherMetrics())
    try:
        with pytest.raises(PermanentError):
            async with UnitOfWork(pool, repo.SCHEMA) as uow:
                for call_id in ids:
                    finishing.step_before_commit(uow, call_id)
                await uow.commit()
        stepper.seen.clear()
        async with UnitOfWork(pool, repo.SCHEMA) as uow:
            for call_id in ids:
                finishing.step_before_commit(uow, call_id)
            await uow.commit()
        assert stepper.seen == []
        due = await pool.fetchval("SELECT count(*) FROM dispatcher.calls WHERE"
                                  " logical_call_id = ANY($1) AND next_action_at <= now()", ids)
        assert due == 2
        async with UnitOfWork(pool, repo.SCHEMA) as uow:  # handed over once, not forever
            finishing.step_before_commit(uow, good.logical_call_id)
            await uow.commit()
        assert stepper.seen == [good.logical_call_id]
    finally:
        await pool.execute("DELETE FROM dispatcher.outbox WHERE topic = 't.batch-steps'")
        await pool.execute("UPDATE dispatcher.calls SET next_action_at = NULL"
                           " WHERE logical_call_id = ANY($1)", ids)
