"""A stretch of receipts answered in one statement (``attempts.answer_receipts``), against real
PostgreSQL: the calls they name are locked until the transaction ends, an attempt keeps its
first answer, and a receipt carrying another call's key answers nothing, even when it comes
before the right one."""

import uuid

import asyncpg
import pytest

from services.dispatcher import attempts, moves, repository as repo
from shared.contracts.dispatch import CallState
from shared.db.schemas import migrate_service
from tests.support.dispatch import due_calls, unique_suffix

pytestmark = pytest.mark.infra


@pytest.fixture
async def sent(pool):
    """Three calls of one run, each with attempt 1 sent and not answered; committed, so that
    another session can try their locks; deleted afterwards (a dispatcher of a later test
    would find them due)."""
    await migrate_service(pool, "dispatcher")
    run_id = f"receipts-{unique_suffix()}"
    async with pool.acquire() as conn, conn.transaction():
        intents = await due_calls(conn, run_id, 3)
        now = await conn.fetchval("SELECT now()")
        sending = []
        for intent in intents:
            call_moves = moves.Moves(await repo.call_for_update(conn, intent.logical_call_id), 2)
            call_moves.move(CallState.INTENT_RECORDED, next_action_at=now)
            call_moves.start(moves.NewAttempt(1, "send", "worker-a", now))
            call_moves.move(CallState.DISPATCHING, next_action_at=now)
            sending.append(call_moves)
        await moves.write(conn, sending)
    yield intents
    ids = [intent.logical_call_id for intent in intents]
    await pool.execute(f"DELETE FROM {repo.SCHEMA}.attempts WHERE logical_call_id = ANY($1)", ids)
    await pool.execute(f"DELETE FROM {repo.SCHEMA}.calls WHERE run_id = $1", run_id)
    await pool.execute(f"DELETE FROM {repo.SCHEMA}.runs WHERE run_id = $1", run_id)


def applied(logical_call_id: uuid.UUID, balance: int) -> attempts.Answer:
    return attempts.Answer(logical_call_id, 1, "applied", "receipt: applied",
                           {"status": "applied", "result": {"balance_minor": balance}})


async def test_receipts_lock_their_calls_and_answer_each_attempt_once(pool, endpoints, sent):
    one, two, three = sent
    stranger = uuid.uuid4()
    async with pool.acquire() as conn, conn.transaction():
        calls, answered = await attempts.answer_receipts(conn, [
            (f"forged-{unique_suffix()}", applied(two.logical_call_id, 1)),  # another key
            (two.operation_key, applied(three.logical_call_id, 2)),  # another call's key
            (one.operation_key, applied(one.logical_call_id, 900)),
            (one.operation_key, applied(one.logical_call_id, 111)),  # a copy: changes nothing
            (two.operation_key, applied(two.logical_call_id, 800)),
            (stranger.hex, applied(stranger, 333)),  # no such call
        ])

        assert set(calls) == {intent.logical_call_id for intent in sent}
        assert calls[one.logical_call_id] == attempts.ReceiptCall(
            one.operation_key, one.tool_name, one.tool_version)
        assert answered == {(one.logical_call_id, 1), (two.logical_call_id, 1)}
        other = await asyncpg.connect(endpoints.database_url)
        try:
            for intent in sent:
                with pytest.raises(asyncpg.LockNotAvailableError):
                    await other.execute(f"SELECT FROM {repo.SCHEMA}.calls"
                                        " WHERE logical_call_id = $1 FOR UPDATE NOWAIT",
                                        intent.logical_call_id)
        finally:
            await other.close()

    balances = dict(await pool.fetch(
        "SELECT logical_call_id, (receipt -> 'result' ->> 'balance_minor')::int"
        f" FROM {repo.SCHEMA}.attempts WHERE logical_call_id = ANY($1)",
        [intent.logical_call_id for intent in sent]))
    assert balances == {one.logical_call_id: 900, two.logical_call_id: 800,
                        three.logical_call_id: None}

    async with pool.acquire() as conn:  # redelivered: found, and answers nothing
        calls, answered = await attempts.answer_receipts(
            conn, [(one.operation_key, applied(one.logical_call_id, 5))])
    assert set(calls) == {one.logical_call_id} and answered == set()
