"""The people behind one agent client, end to end. Where the issuer names its OAuth clients by
their agents (``agents_from_client_ids``), a person's token through an agent's client proposes
as that agent for the person, and two people behind one agent share the agent's authority and
nothing of each other's calls: one cannot read another's task, withdraw it, take its operation
key or put a call in its run, and neither can the agent itself with its own token.

Through the running gateway in front of the whole pipeline (intake, policy, dispatcher, relay,
wallet) on real Kafka and PostgreSQL, each attack made as the attacker's MCP client makes it,
and the policy's check attacked below the gateway with a withdrawal the gateway signed for
the wrong person. Asserted on the business outcome: the policy's decision and its record of
each withdrawal, the dispatcher's calls, the wallet's debits."""

from __future__ import annotations

import uuid

import pytest
from mcp.shared.exceptions import MCPError

from services.mcp_gateway.callers import Caller
from services.mcp_gateway.calls import RUN_META, run_for
from tests.support.mcp_gateway import (CreatedTask, Tasks, cancel, cancel_unknown, key_meta, mcp,
                                       poll, running_gateway)
from tests.support.pipeline_stack import pipeline, pipeline_stage
from tests.support.wallet import debits, new_wallet
from tests.support.withdrawals import decision, intake_answer, recorded, withdraw

pytestmark = pytest.mark.infra
ALICE, BOB = "finance:b", "intern:bob"
"""Two people of tenant acme in the session's principals file (``finance:a`` approves)."""
OVER_CAP = "80.00"


@pytest.fixture
async def stage(pool, endpoints, tmp_path):
    return await pipeline_stage(pool, endpoints, tmp_path)


async def test_a_person_behind_an_agent_reaches_none_of_another_persons_calls(stage, pool):
    wallet_id = await new_wallet(pool, 10_000)
    key = f"big-{uuid.uuid4().hex[:10]}"
    debit = {"wallet_id": wallet_id, "amount": OVER_CAP, "currency": "EUR"}
    async with (running_gateway(stage, wait_s=3, agents_from_client_ids=True) as gateway,
                pipeline(stage)):
        payer = gateway.payer
        async with (mcp(gateway, gateway.jwt(ALICE, client_id=payer), extensions=[Tasks()]) as alice,
                    mcp(gateway, gateway.jwt(BOB, client_id=payer), extensions=[Tasks()]) as bob,
                    mcp(gateway, gateway.tokens[payer], extensions=[Tasks()]) as agent):
            task = await alice.session.call_tool("wallet.debit", debit, meta=key_meta(key),
                                                  allow_claimed=True)
            assert isinstance(task, CreatedTask) and task.status == "working", task
            alices_run = run_for(Caller(payer, "acme", ALICE), key)
            intent = await intake_answer(pool, stage, alices_run)
            assert (intent["principal_id"], intent["person_id"]) == (payer, ALICE)

            for other in (bob, agent):  # her task id, copied: unknown to them
                with pytest.raises(MCPError) as unknown:
                    await poll(other.session, task.task_id)
                assert unknown.value.message == "unknown task"
                assert await cancel_unknown(other.session, task.task_id)

            refused = {}
            for name, other in (("bob", bob), ("the agent", agent)):
                taken = await other.session.call_tool("wallet.debit", debit, meta=key_meta(key))
                joined = await other.session.call_tool(
                    "wallet.debit", {**debit, "amount": "1.00"},
                    meta={**key_meta(f"small-{uuid.uuid4().hex[:10]}"), RUN_META: alices_run})
                refused |= {(name, what): (result.is_error,
                                           result.structured_content["reason_code"])
                            for what, result in (("her key", taken), ("her run", joined))}
                assert intent["logical_call_id"] not in str(taken.structured_content), \
                    "a refusal names nothing of the intent that holds the key"
            assert refused == {(name, what): (True, code) for name in ("bob", "the agent")
                               for what, code in (("her key", "operation_key_in_use"),
                                                  ("her run", "run_principal_mismatch"))}

            # below the gateway: withdrawals its key signed for bob, and the agent's own
            for_bob = await withdraw(stage, intent, names=payer, signer="mcp-gateway",
                                     agent=payer, person=BOB)
            by_agent = await withdraw(stage, intent, names=payer, signer=payer)
            assert await recorded(pool, [for_bob, by_agent]) == {
                for_bob: ("refused", "not_the_proposer"), by_agent: ("refused", "not_the_proposer")}
            assert await decision(pool, intent) == ("awaiting_approval", None)
            assert (await poll(alice.session, task.task_id)).status == "working"

            assert await cancel(alice.session, task.task_id) == {
                "withdrawn": True, "message": "withdrawn: the task is cancelled"}
    assert await decision(pool, intent) == ("denied", "call_withdrawn")
    assert await pool.fetchval("SELECT count(*) FROM dispatcher.calls WHERE tenant_id = 'acme'"
                               " AND run_id = ANY($1::text[])",
                               [alices_run, run_for(Caller(payer, "acme", BOB), key),
                                run_for(Caller(payer, "acme"), key)]) == 0
    assert await debits(pool, wallet_id) == 0
