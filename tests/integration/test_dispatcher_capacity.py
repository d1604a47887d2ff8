"""A tool's ``max_in_flight`` on real Kafka and PostgreSQL (``services/dispatcher/capacity.py``):
a backlog waits in the dispatcher, in line, instead of in the downstream's queue where its
attempt deadlines would run; the line survives the dispatcher's restart; every call is still
applied once, by one attempt."""

from __future__ import annotations

import asyncio

import pytest

from tests.support.dispatch import Stage, attempts, debit_intent, dispatcher_stage, settled
from tests.support.dispatching import authorize, running
from tests.support.kafka import wait_for
from tests.support.wallet import debits_under, new_wallet

pytestmark = pytest.mark.infra

BOUND = 2
CALLS = 12


@pytest.fixture
async def stage(pool, endpoints, tmp_path) -> Stage:
    async with dispatcher_stage(pool, endpoints, tmp_path) as prepared:
        prepared.write_registry(**{"wallet.debit": {"max_in_flight": BOUND}})
        yield prepared


async def _in_flight_and_in_line(pool, ids) -> tuple[int, int]:
    row = await pool.fetchrow(
        "SELECT (SELECT count(*) FROM dispatcher.attempts"
        "         WHERE logical_call_id = ANY($1) AND status IS NULL) AS in_flight,"
        "       (SELECT count(*) FROM dispatcher.calls"
        "         WHERE logical_call_id = ANY($1) AND capacity = 'waiting') AS in_line", ids)
    return row["in_flight"], row["in_line"]


async def test_a_backlog_waits_in_line_at_the_bound_and_survives_a_restart(stage, pool):
    wallet_id = await new_wallet(pool, 1_000_000)
    intents = [debit_intent(wallet_id, 100) for _ in range(CALLS)]  # a run each
    ids = [intent.logical_call_id for intent in intents]
    seen: list[tuple[int, int]] = []
    stop_watching = asyncio.Event()

    async def watch() -> None:
        while not stop_watching.is_set():
            seen.append(await _in_flight_and_in_line(pool, ids))
            await asyncio.sleep(0.02)

    watcher = asyncio.create_task(watch())
    slow_wallet = {"faults": "wallet.delay=delay:0.3"}
    async with running(stage, wallet=slow_wallet):
        await authorize(stage, *intents)
        # Half of them answered, then the dispatcher (and everything else) stops.
        assert await wait_for(lambda: _settled_count(pool, ids, at_least=CALLS // 2), timeout=60)
    line_at_restart = (await _in_flight_and_in_line(pool, ids))[1]
    async with running(stage, wallet=slow_wallet):
        for intent in intents:
            assert await settled(pool, intent.logical_call_id) == "SUCCEEDED"
    stop_watching.set()
    await watcher

    assert max(in_flight for in_flight, _ in seen) <= BOUND, seen
    assert max(in_line for _, in_line in seen) >= CALLS - BOUND - 2, "the backlog waited in line"
    assert line_at_restart > 0, "calls were still in line when the dispatcher stopped"
    for intent in intents:
        assert await debits_under(pool, intent.operation_key) == 1
        [attempt] = await attempts(pool, intent.logical_call_id)  # no retry, no lookup
        assert (attempt["kind"], attempt["status"]) == ("send", "applied")
    assert not await pool.fetchval(
        "SELECT count(*) FROM dispatcher.calls WHERE logical_call_id = ANY($1)"
        " AND capacity IS NOT NULL", ids), "a settled call keeps no place and no slot"


async def _settled_count(pool, ids, *, at_least: int) -> bool:
    return await pool.fetchval("SELECT count(*) FROM dispatcher.calls"
                               " WHERE logical_call_id = ANY($1) AND state = 'SUCCEEDED'",
                               ids) >= at_least
