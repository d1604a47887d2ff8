"""A step's moves of its call, and a batch's moves of all its calls, written as one statement
(``services/dispatcher/moves.py``), on real PostgreSQL: what the one write leaves (state,
version, counters, the attempt, the run's budget, and the columns each call's moves set and no
other) is what the moves said; a write that lost its race leaves nothing at all (no state, no
attempt, no budget used), and a batch's write with one stale call is refused, naming it."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest

from services.dispatcher import repository as repo
from services.dispatcher import moves as dispatcher_moves
from services.dispatcher.moves import IllegalTransition, Moves, NewAttempt
from shared.contracts.dispatch import CallState as S
from shared.db.schemas import migrate_service
from shared.runs import RunKey
from tests.support.dispatch import debit_intent
from tests.support.transactions import rolled_back

pytestmark = pytest.mark.infra

FENCE = 3


@pytest.fixture(autouse=True)
async def migrated(pool):
    await migrate_service(pool, "dispatcher")


async def new_call(conn, *, compensates: uuid.UUID | None = None) -> repo.Call:
    intent = debit_intent(f"wallet-{uuid.uuid4().hex[:6]}")
    await repo.insert_calls(
        conn, [repo.NewCall(intent.model_dump(mode="json"), {}, "v1", intent.deadline_at,
                            compensates=compensates)],
        [repo.NewRun(RunKey.of(intent), intent.principal_id, intent.deadline_at, 5)])
    return await repo.call_for_update(conn, intent.logical_call_id)


async def row_of(conn, call: repo.Call) -> dict:
    return dict(await conn.fetchrow(
        "SELECT c.state, c.version, c.fence, c.attempts, c.lookups, c.next_action_at,"
        " r.attempts_used, (SELECT count(*) FROM dispatcher.attempts a"
        "   WHERE a.logical_call_id = c.logical_call_id) AS attempt_rows"
        " FROM dispatcher.calls c JOIN dispatcher.runs r USING (tenant_id, run_id)"
        " WHERE c.logical_call_id = $1", call.logical_call_id))


async def first_send(conn, call: repo.Call, kind: str = "send") -> Moves:
    """An authorization's step: the intent, attempt 1, DISPATCHING."""
    now = await conn.fetchval("SELECT now()")
    moves = Moves(call, FENCE)
    moves.move(S.INTENT_RECORDED, next_action_at=now)
    moves.start(NewAttempt(1, kind, "worker-a", now + timedelta(seconds=5)))
    moves.move(S.DISPATCHING, next_action_at=now + timedelta(seconds=5))
    return moves


async def test_two_moves_and_an_attempt_are_one_write_of_what_they_said(pool):
    async with rolled_back(pool) as conn:
        call = await new_call(conn)
        moves = await first_send(conn, call)
        unwritten = await row_of(conn, call)
        assert (unwritten["state"], unwritten["attempt_rows"]) == ("AUTHORIZED", 0)
        written = await moves.write(conn)
        row = await row_of(conn, call)
        assert (row["state"], row["version"], row["fence"]) == ("DISPATCHING", call.version + 2,
                                                                FENCE)
        assert (row["attempts"], row["lookups"], row["attempt_rows"], row["attempts_used"]) == (
            1, 0, 1, 1)
        assert row["next_action_at"] == await conn.fetchval("SELECT now() + interval '5 s'")
        assert written.version == row["version"] and not moves.pending
        attempt = await conn.fetchrow("SELECT attempt, kind, fence, worker_id, status"
                                      " FROM dispatcher.attempts WHERE logical_call_id = $1",
                                      call.logical_call_id)
        assert tuple(attempt) == (1, "send", FENCE, "worker-a", None)


async def test_a_write_whose_row_moved_meanwhile_leaves_nothing(pool):
    async with rolled_back(pool) as conn:
        call = await new_call(conn)
        moves = await first_send(conn, call)
        # Another step moved the call after this one read it (the version it compares with).
        await conn.execute("UPDATE dispatcher.calls SET version = version + 1"
                           " WHERE logical_call_id = $1", call.logical_call_id)
        before = await row_of(conn, call)
        with pytest.raises(IllegalTransition, match="stale"):
            await moves.write(conn)
        assert await row_of(conn, call) == before  # no state, no attempt, no budget used
        assert before["attempt_rows"] == 0 and before["attempts_used"] == 0


async def test_a_write_under_an_older_fence_than_the_rows_leaves_nothing(pool):
    async with rolled_back(pool) as conn:
        call = await new_call(conn)
        await conn.execute("UPDATE dispatcher.calls SET fence = $2 WHERE logical_call_id = $1",
                           call.logical_call_id, FENCE + 1)  # a later lease holder wrote it
        before = await row_of(conn, call)
        with pytest.raises(IllegalTransition):
            await (await first_send(conn, call)).write(conn)
        assert await row_of(conn, call) == before


@pytest.mark.parametrize("kind, compensation", [("lookup", False), ("send", True)])
async def test_lookups_and_compensations_never_spend_the_runs_budget(pool, kind, compensation):
    async with rolled_back(pool) as conn:
        original = (await new_call(conn)).logical_call_id if compensation else None
        call = await new_call(conn, compensates=original)
        await (await first_send(conn, call, kind)).write(conn)
        row = await row_of(conn, call)
        assert (row["attempts"], row["attempt_rows"], row["attempts_used"]) == (1, 1, 0)
        assert row["lookups"] == (1 if kind == "lookup" else 0)


async def test_an_illegal_move_is_refused_before_anything_is_written(pool):
    async with rolled_back(pool) as conn:
        call = await new_call(conn)
        before = await row_of(conn, call)
        moves = Moves(call, FENCE)
        with pytest.raises(IllegalTransition, match="not allowed"):
            moves.move(S.SUCCEEDED, next_action_at=None)  # AUTHORIZED -> SUCCEEDED: no edge
        await moves.write(conn)
        assert await row_of(conn, call) == before


async def test_a_batchs_moves_are_one_write_each_call_getting_its_own(pool):
    """Three calls in three runs, as a batch's steps leave them: one sent, one settled with a
    result, one that had a reason and whose move sets none (it keeps its reason)."""
    async with rolled_back(pool) as conn:
        sent, settled, kept = [await new_call(conn) for _ in range(3)]
        await conn.execute("UPDATE dispatcher.calls SET state = 'DISPATCHING', version = 3,"
                           " reason = 'earlier', result = '{\"old\": 1}'"
                           " WHERE logical_call_id = ANY($1)",
                           [settled.logical_call_id, kept.logical_call_id])
        settled, kept = [await repo.call_for_update(conn, call.logical_call_id)
                         for call in (settled, kept)]
        now = await conn.fetchval("SELECT now()")
        batch = [await first_send(conn, sent), Moves(settled, FENCE), Moves(kept, FENCE)]
        batch[1].move(S.SUCCEEDED, next_action_at=None, result={"debited": 40},
                      receipt_id="r-1", succeeded_at=now)
        batch[2].move(S.UNKNOWN, next_action_at=now)
        await dispatcher_moves.write(conn, batch)

        assert not any(moves.pending for moves in batch)
        rows = {call.logical_call_id: dict(await conn.fetchrow(
            "SELECT state, version, fence, reason, result::text, receipt_id, succeeded_at,"
            " next_action_at, attempts FROM dispatcher.calls WHERE logical_call_id = $1",
            call.logical_call_id)) for call in (sent, settled, kept)}
        assert rows[sent.logical_call_id] | {"next_action_at": None} == {
            "state": "DISPATCHING", "version": sent.version + 2, "fence": FENCE, "reason": None,
            "result": None, "receipt_id": None, "succeeded_at": None, "next_action_at": None,
            "attempts": 1}
        assert rows[settled.logical_call_id] == {
            "state": "SUCCEEDED", "version": 4, "fence": FENCE, "reason": "earlier",
            "result": '{"debited": 40}', "receipt_id": "r-1", "succeeded_at": now,
            "next_action_at": None, "attempts": 0}
        assert rows[kept.logical_call_id] == {
            "state": "UNKNOWN", "version": 4, "fence": FENCE, "reason": "earlier",
            "result": '{"old": 1}', "receipt_id": None, "succeeded_at": None,
            "next_action_at": now, "attempts": 0}
        assert (await row_of(conn, sent))["attempt_rows"] == 1


async def test_a_batchs_write_with_one_stale_call_is_refused_naming_it(pool):
    async with rolled_back(pool) as conn:
        fresh, stale = [await new_call(conn) for _ in range(2)]
        batch = [await first_send(conn, fresh), await first_send(conn, stale)]
        await conn.execute("UPDATE dispatcher.calls SET version = version + 1"
                           " WHERE logical_call_id = $1", stale.logical_call_id)
        with pytest.raises(IllegalTransition, match=str(stale.logical_call_id)) as refused:
            await dispatcher_moves.write(conn, batch)
        assert str(fresh.logical_call_id) not in str(refused.value)
        assert all(moves.pending for moves in batch)  # nothing taken as written


async def test_two_sets_of_moves_of_one_call_are_never_written_together(pool):
    """PostgreSQL would update the row once, with one of them: the other's moves lost."""
    async with rolled_back(pool) as conn:
        call = await new_call(conn)
        twice = [await first_send(conn, call), await first_send(conn, call)]
        before = await row_of(conn, call)
        with pytest.raises(ValueError, match="one call"):
            await dispatcher_moves.write(conn, twice)
        assert await row_of(conn, call) == before
