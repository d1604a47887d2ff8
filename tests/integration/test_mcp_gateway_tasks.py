"""Calls that outlast their ``tools/call`` as MCP tasks (the 2026-07-28 tasks extension), with
the official SDK's client declaring the extension, in front of the whole pipeline on real
Kafka and PostgreSQL: a call awaiting approval becomes a task the client polls, completed
with the settled result once a person approves; the SDK's own call resolves such a task
transparently; a client without the extension (on either protocol era) is answered pending."""

from __future__ import annotations

import asyncio
import json
import uuid

import pytest
from intentledger_client import Handle
from mcp.shared.exceptions import MCPError

from services.mcp_gateway.callers import Caller
from services.mcp_gateway.calls import run_for
from services.mcp_gateway.tasks import task_id
from tests.support.mcp_gateway import (CreatedTask, Tasks, cancel, key_meta, mcp, poll,
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
