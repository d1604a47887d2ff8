"""Calls that outlast their ``tools/call`` as MCP tasks (the 2026-07-28 tasks extension), with
the official SDK's client declaring the extension, in front of the whole pipeline on real
Kafka and PostgreSQL: a call awaiting approval becomes a task the client polls, completed
with the settled result once a person approves; the SDK's own call resolves such a task
transparently; a client without the extension (on either protocol era) is answered pending."""

from __future__ import annotations

import asyncio
import json
import uuid

import mcp_types as types
import pytest
from intentledger_client import Handle
from mcp.shared.exceptions import MCPError

from services.mcp_gateway.callers import Caller
from services.mcp_gateway.calls import run_for
from services.mcp_gateway.tasks import task_id
from tests.support.mcp_gateway import (CreatedTask, Tasks, cancel, key_meta, listen, mcp, poll,
                                       running_gateway, until_done)
from tests.support.pipeline import approve
from tests.support.pipeline_stack import pipeline, pipeline_stage
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


async def intake_answer(pool, stage, run_id: str) -> dict:
    async def found():
        return await pool.fetchval(
            "SELECT envelope->'payload' FROM proposal_intake.outbox WHERE topic = $1"
            " AND envelope->'payload'->>'run_id' = $2", stage.results_topic(), run_id)
    payload = await wait_for(found, timeout=60)
    assert payload is not None, f"the intake never answered run {run_id}"
    return json.loads(payload)


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
        assert (late["withdrawn"], late["reason_code"]) == (False, "task_ended")
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
    async with mcp(gateway, gateway.tokens[gateway.payer]) as undeclared:
        with pytest.raises(MCPError) as refused:
            await listen(undeclared.session, [task_id(globex)])
    assert refused.value.code == -32003, "task notifications need the extension declared"


async def cancel_unknown(session, task: str) -> bool:
    with pytest.raises(MCPError) as unknown:
        await cancel(session, task)
    return unknown.value.message == "unknown task"


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
