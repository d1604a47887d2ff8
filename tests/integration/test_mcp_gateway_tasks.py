"""Calls that outlast their ``tools/call`` as MCP tasks (the 2026-07-28 tasks extension), with
the official SDK's client declaring the extension, in front of the whole pipeline on real
Kafka and PostgreSQL: a call awaiting approval becomes a task the client polls, or listens to,
completed with the settled result once a person approves; the SDK's own call resolves such a
task transparently; a client without the extension (on either protocol era) is answered
pending.

Cancelling a task withdraws its call while it awaits approval, and nobody else's withdrawal
counts: not another agent's, not a forged, expired, misused or misdelegated one, not one that
names another tenant. Asserted on the business outcome: the call's decision, the policy's
record of each withdrawal, the wallet's debits."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta

import mcp_types as types
import pytest
from intentledger_client import Handle
from mcp.shared.exceptions import MCPError

from services.mcp_gateway.callers import Caller
from services.mcp_gateway.calls import run_for
from services.mcp_gateway.tasks import task_id
from shared.identity.signatures import PROPOSAL
from tests.support.mcp_gateway import (CreatedTask, Tasks, cancel, cancel_unknown, key_meta,
                                       listen, mcp, poll, running_gateway, until_done)
from tests.support.pipeline import approve
from tests.support.pipeline_stack import pipeline, pipeline_stage
from tests.support.withdrawals import decision, intake_answer, recorded, withdraw
from tests.support.kafka import wait_for
from tests.support.wallet import debits, new_wallet

pytestmark = pytest.mark.infra
OVER_CAP = "80.00"


@pytest.fixture
async def stage(pool, endpoints, tmp_path):
    return await pipeline_stage(pool, endpoints, tmp_path)


@pytest.fixture
async def gateway(stage):
    async with running_gateway(stage, wait_s=3) as gateway:
        yield gateway


async def test_a_call_awaiting_approval_is_a_task_completed_once_a_person_approves(
        gateway, stage, pool):
    wallet_id = await new_wallet(pool, 10_000)
    key = f"big-{uuid.uuid4().hex[:10]}"
    debit = {"wallet_id": wallet_id, "amount": OVER_CAP, "currency": "EUR"}
    async with pipeline(stage), mcp(gateway, gateway.tokens[gateway.payer],
                                    extensions=[Tasks()]) as client:
        task = await client.session.call_tool("wallet.debit", debit, meta=key_meta(key),
                                               allow_claimed=True)
        assert isinstance(task, CreatedTask) and task.status == "working", task
        still = await poll(client.session, task.task_id)
        assert (still.status, still.result) == ("working", None)
        assert await debits(pool, wallet_id) == 0
        intent = await intake_answer(pool, stage, run_for(Caller(gateway.payer, "acme"), key))
        await approve(stage, intent, "finance:a")
        done = await until_done(client.session, task.task_id)
        late = await cancel(client.session, task.task_id)
        assert (late["withdrawn"], late["reason_code"]) == (False, "task_ended"), late
        assert "completed already" in late["message"]
        # withdrawing is not cancelling an effect: once allowed, the agent's own withdrawal
        # of the call is refused, and it was debited once
        refused = await withdraw(stage, intent, names=gateway.payer, signer=gateway.payer)
        assert (await recorded(pool, [refused]))[refused] == (
            "refused", "call_not_awaiting_approval")
        assert await decision(pool, intent) == ("allowed", None)
    assert not done.is_error and done.structured_content["balance_minor"] == 2_000
    assert await debits(pool, wallet_id) == 1


async def test_the_sdks_call_resolves_the_task_and_a_client_without_tasks_gets_pending(
        gateway, stage, pool):
    wallet_id = await new_wallet(pool, 10_000)
    key = f"big-{uuid.uuid4().hex[:10]}"
    debit = {"wallet_id": wallet_id, "amount": OVER_CAP, "currency": "EUR"}
    run = run_for(Caller(gateway.payer, "acme"), key)
    async with pipeline(stage):
        async with mcp(gateway, gateway.tokens[gateway.payer], mode="legacy") as legacy:
            pending = await legacy.call_tool("wallet.debit", debit, meta=key_meta(key))
            assert legacy.protocol_version == "2025-11-25"
        assert pending.is_error and pending.structured_content["status"] == "awaiting_approval"
        async with mcp(gateway, gateway.tokens[gateway.payer], extensions=[Tasks()]) as client:
            calling = asyncio.create_task(client.call_tool("wallet.debit", debit,
                                                           meta=key_meta(key)))
            await asyncio.sleep(4)  # past the gateway's wait: the call is a task now
            assert not calling.done()
            await approve(stage, await intake_answer(pool, stage, run), "finance:a")
            settled = await asyncio.wait_for(calling, 90)
    assert not settled.is_error and settled.structured_content["balance_minor"] == 2_000
    assert await debits(pool, wallet_id) == 1, "the retry was the same intent"


async def test_a_task_of_another_tenant_or_a_forged_id_is_unknown(gateway, stage):
    globex = Handle(tenant_id="globex", run_id="run-1", call_id="call-1", proposal_id=uuid.uuid4(),
                    partition=0)
    async with mcp(gateway, gateway.tokens[gateway.payer], extensions=[Tasks()]) as client:
        for forged in ("not-a-task", task_id(globex)):
            with pytest.raises(MCPError) as unknown:
                await poll(client.session, forged)
            assert unknown.value.message == "unknown task"
        assert await cancel_unknown(client.session, task_id(globex))
        for malformed in ("not-a-list", [1, 2]):
            with pytest.raises(MCPError) as refused:
                await listen(client.session, malformed)
            assert refused.value.code == types.INVALID_PARAMS, malformed
    async with mcp(gateway, gateway.tokens[gateway.payer]) as undeclared:
        for method in (listen, poll, cancel):
            arguments = [task_id(globex)] if method is listen else task_id(globex)
            with pytest.raises(MCPError) as refused:
                await method(undeclared.session, arguments)
            assert refused.value.code == -32003, f"{method.__name__} needs the extension declared"


async def test_a_listening_client_is_told_each_status_of_its_task_until_it_completes(
        gateway, stage, pool):
    """``subscriptions/listen`` with task ids: the acknowledgement names only the caller's own
    tasks, a frame comes with the current state and each change, and the stream ends once the
    task is terminal; the last frame carries the result, so no poll is needed."""
    wallet_id = await new_wallet(pool, 10_000)
    key = f"big-{uuid.uuid4().hex[:10]}"
    debit = {"wallet_id": wallet_id, "amount": OVER_CAP, "currency": "EUR"}
    globex = task_id(Handle(tenant_id="globex", run_id="run-1", call_id="call-1",
                            proposal_id=uuid.uuid4(), partition=0))
    frames, acks = [], []

    async def acknowledged(message) -> None:
        if isinstance(message, types.SubscriptionsAcknowledgedNotification):
            acks.append(message.params.notifications.model_extra["taskIds"])

    async with pipeline(stage), mcp(gateway, gateway.tokens[gateway.payer],
                                    extensions=[Tasks(frames.append)],
                                    message_handler=acknowledged) as client:
        assert not client.server_capabilities.tools.list_changed, "nothing announces that"
        task = await client.session.call_tool("wallet.debit", debit, meta=key_meta(key),
                                               allow_claimed=True)
        listening = asyncio.create_task(listen(client.session, [task.task_id, globex]))

        async def first_frame():
            return frames
        assert await wait_for(first_frame, timeout=30), "no first frame"
        assert not listening.done()
        await approve(stage, await intake_answer(pool, stage, run_for(
            Caller(gateway.payer, "acme"), key)), "finance:a")
        await asyncio.wait_for(listening, 90)
    assert acks == [[task.task_id]], "another tenant's task is not followed"
    assert [(frame.task_id, frame.status) for frame in frames] == [
        (task.task_id, "working"), (task.task_id, "completed")], frames
    assert frames[-1].result["structuredContent"]["balance_minor"] == 2_000
    assert await debits(pool, wallet_id) == 1


async def test_only_the_calls_own_agent_withdraws_it_and_the_task_is_then_cancelled(
        gateway, stage, pool):
    wallet_id = await new_wallet(pool, 10_000)
    key = f"big-{uuid.uuid4().hex[:10]}"
    debit = {"wallet_id": wallet_id, "amount": OVER_CAP, "currency": "EUR"}
    payer, stocker = gateway.payer, gateway.stocker
    async with pipeline(stage), mcp(gateway, gateway.tokens[payer], extensions=[Tasks()]) as client:
        task = await client.session.call_tool("wallet.debit", debit, meta=key_meta(key),
                                               allow_claimed=True)
        assert isinstance(task, CreatedTask) and task.status == "working", task
        intent = await intake_answer(pool, stage, run_for(Caller(payer, "acme"), key))

        attacks = {
            "not_the_proposer": dict(names=stocker, signer=stocker),
            "signature_principal_mismatch": dict(names=payer, signer=stocker),
            "signature_for_another_use": dict(names=payer, signer=payer, use=PROPOSAL),
            "signature_expired": dict(names=payer, signer=payer,
                                      issued=datetime.now(UTC) - timedelta(minutes=10)),
            "signer_not_proposer_for_others": dict(names=payer, signer="svc:impostor",
                                                   agent=payer),
            "signature_tenant_mismatch": dict(names=payer, signer=payer, signed_for="globex"),
            "call_unknown": dict(names="globex-agent", signer="globex-agent", tenant="globex",
                                 signed_for="globex"),
        }
        sent = {code: await withdraw(stage, intent, **attack) for code, attack in attacks.items()}
        found = await recorded(pool, list(sent.values()))
        assert {code: found[event] for code, event in sent.items()} == {
            code: ("refused", code) for code in attacks}
        assert await decision(pool, intent) == ("awaiting_approval", None)
        assert (await poll(client.session, task.task_id)).status == "working"

        assert await cancel(client.session, task.task_id) == {
            "withdrawn": True, "message": "withdrawn: the task is cancelled"}
        assert (await poll(client.session, task.task_id)).status == "cancelled"
        again = await cancel(client.session, task.task_id)
        assert (again["withdrawn"], again["reason_code"]) == (False, "task_ended"), again
        assert "cancelled already" in again["message"]

        approval = await approve(stage, intent, "finance:a")  # too late: nothing is waiting
        refused = await wait_for(lambda: pool.fetchval(
            "SELECT reason_code FROM policy.approvals WHERE approval_event_id = $1",
            approval.event_id), timeout=60)
    assert refused == "approval_not_pending"
    assert await decision(pool, intent) == ("denied", "call_withdrawn")
    assert await pool.fetchval("SELECT count(*) FROM policy.withdrawals WHERE logical_call_id = $1"
                               " AND outcome = 'applied'", uuid.UUID(intent["logical_call_id"])) == 1
    assert await debits(pool, wallet_id) == 0
    assert await pool.fetchval("SELECT count(*) FROM dispatcher.calls WHERE logical_call_id = $1",
                               uuid.UUID(intent["logical_call_id"])) == 0, "nothing dispatched"
