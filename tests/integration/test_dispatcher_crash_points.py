"""A dispatcher process killed at each of its named crash points (docs/design.md §5.2, §6) and
restarted: one debit whatever the point, the attempts each point calls for, and which
transaction wrote what. Outcomes are read from the wallet's tables and the dispatcher's
records."""

from __future__ import annotations

import asyncio

import pytest

from shared import faults
from shared.operator.publish import publish
from tests.support.dispatch import attempts, authorization, call_row, debit_intent, settled
from tests.support.dispatcher_faults import (crash_then_restart, dispatcher, http_wallet,
                                             relay_and_wallet, stage)
from tests.support.ports import free_port
from tests.support.wallet import debits_under, new_wallet

pytestmark = pytest.mark.infra
__all__ = ["stage"]  # the fixture, used by every test here


async def test_killed_after_the_wallet_committed_and_before_recording_then_reconciled(stage, pool):
    """The opening story: debit committed, response lost with the process. The restarted
    dispatcher takes the run over, calls the attempt UNKNOWN, looks the key up, and records the
    one debit that exists: attempt_count >= 2, SUCCEEDED through reconciliation."""
    port = free_port()
    http_wallet(stage, port)
    wallet_id = await new_wallet(pool, 10_000)
    intent = debit_intent(wallet_id, 4000)

    async def the_wallet_did_commit() -> None:
        assert await debits_under(pool, intent.operation_key) == 1

    async with relay_and_wallet(stage, http_port=port):
        await crash_then_restart(stage, pool, intent, "dispatcher.after_send_before_record",
                                 the_wallet_did_commit)
    assert await debits_under(pool, intent.operation_key) == 1
    history = await attempts(pool, intent.logical_call_id)
    assert len(history) >= 2
    assert (history[0]["kind"], history[0]["status"]) == ("send", "unknown")
    assert (history[-1]["kind"], history[-1]["status"]) == ("lookup", "applied")
    assert history[-1]["fence"] > history[0]["fence"]  # the second process took the run over
    events = await pool.fetch("SELECT envelope->>'event_type' AS type FROM dispatcher.outbox"
                              " WHERE envelope->'payload'->>'logical_call_id' = $1"
                              " AND topic LIKE 'ledger.dispatch%' ORDER BY position",
                              str(intent.logical_call_id))
    types = [event["type"] for event in events]
    assert types[-3:] == ["ToolOutcomeMarkedUnknown", "ToolAttemptStarted", "ToolEffectReconciled"]


async def test_killed_after_sending_while_the_wallet_loses_its_receipt(stage, pool):
    """The same story on the Kafka adapter: the request is an outbox row, so the relay delivers
    it although the dispatcher died; the wallet commits and drops its receipt; the restarted
    dispatcher reaches the attempt deadline, looks up, and finds the one debit."""
    wallet_id = await new_wallet(pool, 10_000)
    intent = debit_intent(wallet_id, 1500)
    async with relay_and_wallet(stage, faults="wallet.after_commit_drop_response=drop"):
        await crash_then_restart(stage, pool, intent, "dispatcher.after_send_before_record")
    assert await debits_under(pool, intent.operation_key) == 1
    assert [(a["kind"], a["status"]) for a in await attempts(pool, intent.logical_call_id)] == [
        ("send", "unknown"), ("lookup", "applied")]


async def test_killed_after_recording_the_intent_and_before_sending(stage, pool):
    """An HTTP tool's request leaves the process the moment it is made, so its intent commits
    on its own first (in the scheduler's step, not in the authorization's transaction): killed
    there, the call is INTENT_RECORDED with nothing sent, and the restarted dispatcher sends
    attempt 1, once."""
    port = free_port()
    http_wallet(stage, port)
    wallet_id = await new_wallet(pool, 10_000)
    intent = debit_intent(wallet_id, 900)

    async def recorded_but_not_sent() -> None:
        assert (await call_row(pool, intent.logical_call_id))["state"] == "INTENT_RECORDED"
        assert await debits_under(pool, intent.operation_key) == 0
        assert await attempts(pool, intent.logical_call_id) == []

    async with relay_and_wallet(stage, http_port=port):
        await crash_then_restart(stage, pool, intent, "dispatcher.after_intent_before_send",
                                 recorded_but_not_sent)
    assert await debits_under(pool, intent.operation_key) == 1
    assert len(await attempts(pool, intent.logical_call_id)) == 1


async def test_a_kafka_tools_intent_and_first_send_commit_together(stage, pool):
    """A Kafka tool's request is an outbox row, published only after its transaction commits:
    the authorization's transaction records the intent, attempt 1 and its request at once.
    Killed the moment it commits (offset not yet committed), the call is DISPATCHING and that
    one transaction wrote the inbox marker, the call, the attempt and the request (read before
    any relay runs: marking a row published rewrites it). Then the relay delivers the request,
    and the restarted dispatcher skips the redelivered authorization and settles the call from
    the wallet's answer. One debit, one send."""
    wallet_id = await new_wallet(pool, 10_000)
    intent = debit_intent(wallet_id, 900)
    first = dispatcher(stage, "first", faults="dispatcher.after_commit=exit@1")
    await publish(stage.endpoints.kafka_bootstrap, stage.authorizations,
                  authorization(intent, stage.write_policy()))
    assert await asyncio.to_thread(first.wait_exit, 60) == faults.EXIT_CODE
    written = await pool.fetchrow(
        "SELECT c.state, c.xmin::text AS call, a.xmin::text AS attempt,"
        " (SELECT count(*) FROM dispatcher.inbox i WHERE i.xmin = c.xmin) AS markers,"
        " (SELECT array_agg(o.envelope->>'event_type' ORDER BY o.position)"
        "  FROM dispatcher.outbox o WHERE o.xmin = c.xmin"
        "  AND o.envelope->'payload'->>'logical_call_id' = $1::text) AS outbox"
        " FROM dispatcher.calls c JOIN dispatcher.attempts a USING (logical_call_id)"
        " WHERE c.logical_call_id = $1::uuid", str(intent.logical_call_id))
    assert written["state"] == "DISPATCHING"
    assert written["call"] == written["attempt"]
    assert written["markers"] == 1  # the authorization's
    assert written["outbox"] == ["DispatchIntentRecorded", "ToolAttemptStarted",
                                 "EffectRequested"]
    async with relay_and_wallet(stage):
        second = dispatcher(stage, "second")
        try:
            assert await settled(pool, intent.logical_call_id) == "SUCCEEDED"
        finally:
            second.stop()
    assert await debits_under(pool, intent.operation_key) == 1
    # Never sent again. (Its receipt may reach the restarted dispatcher after the attempt's
    # deadline, while the dead member's session has yet to expire: then a lookup finds the
    # debit.)
    history = [(a["kind"], a["status"]) for a in await attempts(pool, intent.logical_call_id)]
    assert history in ([("send", "applied")], [("send", "unknown"), ("lookup", "applied")])


async def test_killed_as_the_receipt_commits_the_call_is_settled_already(stage, pool):
    """A receipt, the settlement it proves and the events announcing it are one transaction
    (services/dispatcher/finishing.py). Killed the moment the receipt's batch commits (its Kafka
    offset not yet; the first commit was the authorization's), the call is SUCCEEDED already,
    by that very transaction; the restarted dispatcher skips the redelivered receipt."""
    wallet_id = await new_wallet(pool, 10_000)
    intent = debit_intent(wallet_id, 700)

    async def settled_by_the_receipts_transaction() -> None:
        assert (await call_row(pool, intent.logical_call_id))["state"] == "SUCCEEDED"
        assert await pool.fetchval(
            "SELECT a.xmin::text = c.xmin::text FROM dispatcher.attempts a"
            " JOIN dispatcher.calls c USING (logical_call_id) WHERE logical_call_id = $1",
            intent.logical_call_id)

    async with relay_and_wallet(stage):
        await crash_then_restart(stage, pool, intent, "dispatcher.after_commit",
                                 settled_by_the_receipts_transaction, hit=2)
    assert await debits_under(pool, intent.operation_key) == 1
    assert [(a["kind"], a["status"]) for a in await attempts(pool, intent.logical_call_id)] == [
        ("send", "applied")]
