"""Faults injected into real dispatcher processes (docs/design.md §5, §6) other than a crash at
a named point (test_dispatcher_crash_points.py): paused while another replica takes its runs
over, facing a wallet that always fails, a run past its deadline, a step that fails mid-saga, an
open breaker. Outcomes are read from the wallet's tables and the dispatcher's records: one debit,
the attempts made, the stale writes refused."""

from __future__ import annotations

import asyncio
import signal
import uuid
from datetime import timedelta

import pytest

from shared import faults
from shared.operator.publish import publish
from tests.support.dispatch import (Stage, accepted, attempts, authorization, call_row,
                                    call_state, debit_intent, running_policy_on, settled)
from tests.support.dispatching import announcements
from tests.support.dispatcher_faults import dispatcher, http_wallet, relay_and_wallet, stage
from tests.support.kafka import wait_for
from tests.support.ports import free_port
from tests.support.wallet import balance, debits_under, new_wallet

pytestmark = pytest.mark.infra
__all__ = ["stage"]  # the fixture, used by every test here


async def against_a_failing_wallet(stage: Stage, pool, max_attempts: int, *,
                                   deadline_in: float = 60.0, **dispatcher_overrides):
    """One debit against a wallet whose HTTP API answers 503 to everything, under a contract
    that says a 5xx applied nothing; returns the intent once FAILED, and its attempts. The
    intent, and with it the run's deadline, is made once the dispatcher consumes: a short
    deadline must not be spent on the process's start-up."""
    port = free_port()
    http_wallet(stage, port, max_attempts=max_attempts, server_errors="not_applied")
    wallet_id = await new_wallet(pool, 10_000)
    async with relay_and_wallet(stage, http_port=port, faults="wallet.http.fail=drop"):
        worker = dispatcher(stage, "worker", **dispatcher_overrides)
        try:
            assert await asyncio.to_thread(worker.wait_for_log, "dispatcher started", 60)
            intent = debit_intent(wallet_id, 500, deadline_in=deadline_in)
            await publish(stage.endpoints.kafka_bootstrap, stage.authorizations,
                          authorization(intent, stage.write_policy()))
            assert await settled(pool, intent.logical_call_id) == "FAILED"
        finally:
            worker.stop()
    assert await debits_under(pool, intent.operation_key) == 0
    return intent, await attempts(pool, intent.logical_call_id)


async def stale_writes(pool, run_id: str) -> list[dict]:
    rows = await pool.fetch("SELECT worker_id, held_fence, current_fence, action"
                            " FROM dispatcher.stale_writes WHERE run_id = $1", run_id)
    return [dict(row) for row in rows]


async def test_a_paused_worker_that_wakes_after_takeover_is_fenced_off(stage, pool):
    """Two replicas. The first records attempt 1 and stalls before sending it (SIGSTOP while
    it is held at dispatcher.before_send); its lease lapses; the second takes the run over
    (fence + 1), waits out attempt 1's deadline, reconciles (lookup: not found) and debits under
    the same key. The first then wakes: its attempt's deadline has passed, so it sends nothing,
    and its write of that outcome is refused by the lease check and kept as evidence. One
    debit. (The wallet's own refusal of an old fence is tested in test_wallet*.py.)"""
    port = free_port()
    http_wallet(stage, port)
    wallet_id = await new_wallet(pool, 10_000)
    intent = debit_intent(wallet_id, 3000)
    async with relay_and_wallet(stage, http_port=port):
        paused = dispatcher(stage, "paused", faults="dispatcher.before_send=delay:6@1")
        await publish(stage.endpoints.kafka_bootstrap, stage.authorizations,
                      authorization(intent, stage.write_policy()))
        assert await wait_for(lambda: attempts(pool, intent.logical_call_id), timeout=60)
        paused.process.send_signal(signal.SIGSTOP)
        other = dispatcher(stage, "other")  # joins the consumer group: a rebalance
        try:
            assert await settled(pool, intent.logical_call_id) == "SUCCEEDED"
            paused.process.send_signal(signal.SIGCONT)
            refused = await wait_for(lambda: stale_writes(pool, intent.run_id), timeout=60)
        finally:
            paused.process.send_signal(signal.SIGCONT)
            paused.stop()
            other.stop()
    assert await debits_under(pool, intent.operation_key) == 1
    history = await attempts(pool, intent.logical_call_id)
    assert history[0]["fence"] < history[-1]["fence"]
    assert history[-1]["status"] == "applied"
    [stale] = refused
    assert stale["held_fence"] == history[0]["fence"] and stale["current_fence"] > stale["held_fence"]
    assert "nothing sent" in stale["action"]


async def test_a_wallet_that_always_fails_gets_the_attempt_budget_and_no_more(stage, pool):
    """5xx on every attempt under a contract that says a 5xx applied nothing: the dispatcher
    retries with backoff until the tool's attempt budget is spent, then records FAILED."""
    intent, history = await against_a_failing_wallet(stage, pool, 3, breaker_failures=10)
    assert [(a["kind"], a["status"]) for a in history] == [("send", "transient")] * 3
    assert (await call_row(pool, intent.logical_call_id))["reason"] == "call_attempt_budget_exhausted"
    for earlier, later in zip(history, history[1:], strict=False):
        assert later["started_at"] > earlier["finished_at"]  # a backoff between attempts


async def test_retries_stop_at_the_absolute_run_deadline(stage, pool):
    """A generous attempt budget, a short run: attempts stop before the deadline minus the
    recovery reserve, and no attempt's own deadline reaches past it."""
    intent, history = await against_a_failing_wallet(stage, pool, 100, deadline_in=6.0,
                                                     breaker_failures=1000)
    cutoff = intent.deadline_at - timedelta(seconds=1.0)  # the stage's recovery reserve
    assert 1 < len(history) < 100
    assert all(attempt["deadline_at"] <= cutoff for attempt in history)
    assert all(attempt["started_at"] < cutoff for attempt in history)
    assert (await call_row(pool, intent.logical_call_id))["reason"] == "run_deadline_passed"


async def test_a_failed_step_compensates_the_done_ones_in_reverse_each_once(stage, pool):
    """The saga: reserve stock, debit the wallet, ship; the carrier refuses the shipment. The
    debit is refunded, then the reservation released — each a new effect with its own key —
    although the dispatcher is killed right after requesting the first compensation."""
    from downstreams.warehouse.handlers import stock_sku
    from tests.support.dispatch import running_warehouse_on

    wallet_id = await new_wallet(pool, 10_000)
    sku, order = f"sku-{uuid.uuid4().hex[:8]}", f"tenant/acme/o-{uuid.uuid4().hex[:8]}"
    assert await stock_sku(pool, sku, 10)
    reserve = debit_intent(wallet_id, tool="inventory.reserve",
                           arguments={"sku": sku, "order_id": order, "quantity": 2})
    debit = debit_intent(wallet_id, 4000, run_id=reserve.run_id)
    ship = debit_intent(wallet_id, run_id=reserve.run_id, tool="shipment.schedule",
                        arguments={"order_id": order, "address": "1 Quay Street"})
    async with relay_and_wallet(stage), running_policy_on(stage), running_warehouse_on(
            stage, faults="warehouse.refuse_shipment=drop"):
        first = dispatcher(stage, "first", faults="dispatcher.mid_compensation=exit@1")
        for step in (reserve, debit):  # decided by the policy, which compensates only its own
            await publish(stage.endpoints.kafka_bootstrap, stage.intake, accepted(step))
            assert await settled(pool, step.logical_call_id) == "SUCCEEDED"
        await publish(stage.endpoints.kafka_bootstrap, stage.intake, accepted(ship))
        assert await asyncio.to_thread(first.wait_exit, 60) == faults.EXIT_CODE
        assert await call_state(pool, debit.logical_call_id) == "COMPENSATING"
        second = dispatcher(stage, "second")
        try:
            assert await settled(pool, reserve.logical_call_id, states=("COMPENSATED",
                                                                        "COMPENSATION_FAILED"))
        finally:
            second.stop()
    assert await call_state(pool, ship.logical_call_id) == "FAILED"
    assert await call_state(pool, debit.logical_call_id) == "COMPENSATED"
    assert await call_state(pool, reserve.logical_call_id) == "COMPENSATED"
    assert await pool.fetchval("SELECT count(*) FROM wallet.refunds r JOIN wallet.debits d"
                               " USING (debit_id) WHERE d.operation_key = $1", debit.operation_key) == 1
    assert await balance(pool, wallet_id) == 10_000
    # The agent hears each state once, through the crash; of the refunds, nothing: no agent
    # proposed them.
    told = {step.logical_call_id: [e["payload"]["status"] for e in await announcements(
        pool, stage, step.logical_call_id)] for step in (reserve, debit, ship)}
    assert told == {reserve.logical_call_id: ["SUCCEEDED", "COMPENSATED"],
                    debit.logical_call_id: ["SUCCEEDED", "COMPENSATED"],
                    ship.logical_call_id: ["FAILED"]}
    assert await pool.fetchval(
        "SELECT count(*) FROM dispatcher.outbox o JOIN dispatcher.calls c"
        " ON c.logical_call_id::text = o.envelope->'payload'->>'logical_call_id'"
        " WHERE o.envelope->>'event_type' = 'ToolCallSettled' AND c.compensates IS NOT NULL"
        " AND c.run_id = $1", reserve.run_id) == 0
    assert await pool.fetchval("SELECT count(*) FROM dispatcher.calls WHERE compensates IS NOT"
                               " NULL AND run_id = $1", reserve.run_id) == 2
    assert await pool.fetchval("SELECT count(*) FROM warehouse.releases JOIN warehouse.reservations"
                               " USING (reservation_id) WHERE order_id = $1", order) == 1
    assert await pool.fetchval("SELECT available FROM warehouse.stock WHERE sku = $1", sku) == 10
    assert await pool.fetchval("SELECT count(*) FROM warehouse.shipments WHERE order_id = $1",
                               order) == 0
    compensations = await pool.fetch(
        "SELECT tool_name, state, attempts, capability FROM dispatcher.calls WHERE run_id = $1"
        " AND compensates IS NOT NULL ORDER BY created_at", reserve.run_id)
    assert [(c["tool_name"], c["state"]) for c in compensations] == [
        ("wallet.refund", "SUCCEEDED"), ("inventory.release", "SUCCEEDED")]
    assert all(c["capability"] for c in compensations)  # each sent on the policy's capability
    assert await pool.fetchval(  # and each decided once by the policy, as an allowed intent
        "SELECT count(*) FROM policy.decisions WHERE run_id = $1 AND outcome = 'allowed'"
        " AND inputs->'intent'->>'compensates' IS NOT NULL", reserve.run_id) == 2


async def test_an_open_breaker_holds_attempts_back_instead_of_spending_them(stage, pool):
    """After two failures in a row the wallet's breaker opens for 2 s: the next attempt waits
    for the cool-down (a probe) rather than following the short backoff."""
    _, history = await against_a_failing_wallet(stage, pool, 4, breaker_failures=2,
                                                breaker_cooldown_s=2.0)
    assert len(history) == 4
    gaps = [(later["started_at"] - earlier["finished_at"]).total_seconds()
            for earlier, later in zip(history, history[1:], strict=False)]
    assert gaps[0] < 1.5  # closed: only the backoff
    assert min(gaps[1:]) > 1.8  # open after the second failure, and again after each probe
