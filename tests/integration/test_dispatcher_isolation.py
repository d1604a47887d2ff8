"""What happens when a step fails, on the dispatcher's real tables: a step that fails is isolated
and the rest of its batch commits once, so does a batch whose one write of its calls' moves
finds a call moved meanwhile; a call whose steps keep failing waits ever longer; and a step
failing in a consumer's transaction hands its calls to the scheduler."""

import asyncio
import uuid
from datetime import timedelta
from types import SimpleNamespace

import pytest

from services.dispatcher import leases, repository as repo
from services.dispatcher.adapters.http import HttpEffectAdapter
from services.dispatcher.batch import Batch
from services.dispatcher.breaker import Breakers
from services.dispatcher.finishing import Finishing
from services.dispatcher.metrics import STEP_FAILURE, DispatcherMetrics
from services.dispatcher.moves import Moves
from services.dispatcher.scheduler import Scheduler
from services.dispatcher.steps import StepReport
from shared.contracts.dispatch import CallState
from shared.db.unit_of_work import UnitOfWork
from shared.errors import PermanentError
from shared.messaging.envelope import Envelope
from shared.runs import RunKey
from tests.support.dispatch import dispatcher_stage, due_calls, unique_suffix

pytestmark = pytest.mark.infra


@pytest.fixture
async def stage(pool, endpoints, tmp_path):
    async with dispatcher_stage(pool, endpoints, tmp_path) as prepared:
        yield prepared


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
    good_run, bad_run = f"run-good-{unique_suffix()}", f"run-bad-{unique_suffix()}"
    async with pool.acquire() as conn, conn.transaction():
        [good] = await due_calls(conn, good_run, 1)
        [bad] = await due_calls(conn, bad_run, 1)
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
    run_id = f"run-poison-{unique_suffix()}"
    async with pool.acquire() as conn, conn.transaction():
        [bad] = await due_calls(conn, run_id, 1)
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
        two = await due_calls(conn, f"run-two-{name}", 2)
        [held] = await due_calls(conn, f"run-held-{name}", 1)
        [http] = await due_calls(conn, f"run-http-{name}", 1)
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
        [good] = await due_calls(conn, f"run-good-{name}", 1)
        [bad] = await due_calls(conn, f"run-bad-{name}", 1)
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


class _StepperRacedOn:
    """Records each call's intent, a move its batch writes, as a real step leaves it; the row
    of one call is moved behind the step's back before that write (a race lost)."""

    def __init__(self, raced) -> None:
        self.raced = raced
        self.seen: list = []

    async def step(self, uow, call, lease, now, known):
        self.seen.append(call.logical_call_id)
        moves = Moves(call, lease.fence)
        moves.move(CallState.INTENT_RECORDED, next_action_at=None)
        if call.logical_call_id == self.raced:
            await uow.connection.execute("UPDATE dispatcher.calls SET version = version + 1"
                                         " WHERE logical_call_id = $1", call.logical_call_id)
        return StepReport([], [], moves)

    def tool_of(self, call):
        return None


async def test_a_batch_whose_one_write_finds_a_call_moved_commits_the_rest_once(stage, pool):
    """The batch's moves are one statement; when one call's compare-and-swap fails it fails the
    batch, which is stepped again call by call: the other calls are written once, the raced one
    is left as it was, retried later and counted."""
    runs = [f"run-raced-{unique_suffix()}" for _ in range(3)]
    async with pool.acquire() as conn, conn.transaction():
        calls = [(await due_calls(conn, run, 1))[0] for run in runs]
    raced = calls[1].logical_call_id
    stepper = _StepperRacedOn(raced)
    settings, counted = stage.dispatcher_settings(), DispatcherMetrics()
    scheduler = Scheduler(pool, Batch(stepper, settings), Breakers(5, timedelta(seconds=5)),
                          HttpEffectAdapter(), settings, counted)
    try:
        assert await scheduler.step_batch() == 3
        assert stepper.seen.count(raced) == 2  # the batch, then alone
        rows = {row["logical_call_id"]: row for row in await pool.fetch(
            "SELECT logical_call_id, state, version, next_action_at > now() AS later"
            " FROM dispatcher.calls WHERE run_id = ANY($1::text[])", runs)}
        assert {call_id: row["state"] for call_id, row in rows.items()} == {
            call.logical_call_id: "AUTHORIZED" if call.logical_call_id == raced
            else "INTENT_RECORDED" for call in calls}
        # one move each, written once; of the raced call nothing at all, its race included
        assert {call_id: row["version"] for call_id, row in rows.items()} == {
            call.logical_call_id: 1 if call.logical_call_id == raced else 2 for call in calls}
        assert rows[raced]["later"]
        assert counted.counts[STEP_FAILURE] == 1
    finally:
        await pool.execute("UPDATE dispatcher.calls SET next_action_at = NULL"
                           " WHERE run_id = ANY($1::text[])", runs)
