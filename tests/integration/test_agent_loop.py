"""An agent loop on the whole pipeline (intake, policy, dispatcher, wallet, warehouse,
projection, relay) on real Kafka and PostgreSQL, driven by recorded model responses (no
network): turn 1 debits and reserves in parallel — the wallet's answer to the debit is lost on
the way, the dispatcher finds out by lookup — and the model is handed both settled results;
turn 2 refunds the debit the model read from them; a model repeating turn 1 (in a process that
saw none of it) gets the originals' results and pays nothing more; an agent restarted while its
call settles resumes its handle; a call that must be approved first is told to the model as
awaiting approval, and its handle settles once a person approves."""

from __future__ import annotations

import json
import uuid
from functools import partial

import pytest
from intentledger_client import Handle, to_openai_tool_messages
from intentledger_client.topics import partition_for

from downstreams.warehouse.handlers import stock_sku
from shared import faults
from shared.topology import RESULTS_PARTITIONS
from tests.support.agents import agent
from tests.support.examples import example as load_example
from tests.support.identities import fresh_principal
from tests.support.kafka import wait_for
from tests.support.pipeline import approve
from tests.support.pipeline_stack import pipeline, pipeline_stage
from tests.support.dispatch import attempts, running_warehouse_on
from tests.support.wallet import balance, debits, new_wallet

pytestmark = pytest.mark.infra
SHOP = {"capability_ttl_seconds": 120, "rules": [
    {"name": "shop", "principals": ["agent-*"], "tenants": ["acme"],
     "tools": ["wallet.debit", "wallet.refund", "inventory.reserve"], "effect": "allow"}]}


@pytest.fixture
async def stage(pool, endpoints, tmp_path):
    stage = await pipeline_stage(pool, endpoints, tmp_path)
    stage.write_policy(SHOP)
    yield stage
    faults.configure("")


APPROVED_DEBITS = {"capability_ttl_seconds": 120, "rules": [
    {"name": "debits-need-a-person", "principals": ["agent-*"], "tenants": ["acme"],
     "tools": ["wallet.debit"], "effect": "require_approval",
     "approval": {"quorum": 1, "approvers": ["operator:*"], "ttl_seconds": 600}}]}


def function_call(call_id: str, name: str, arguments: dict) -> dict:
    return {"id": call_id, "type": "function",
            "function": {"name": name, "arguments": json.dumps(arguments)}}


def recorded_turn_1(wallet_id: str, sku: str, order_id: str) -> dict:
    """What chat completions returned: two parallel tool calls, by their aliases."""
    return {"role": "assistant", "content": None, "tool_calls": [
        function_call("call_debit", "wallet_debit",
                      {"wallet_id": wallet_id, "amount": "40.00", "currency": "EUR"}),
        function_call("call_hold", "inventory_reserve",
                      {"sku": sku, "order_id": order_id, "quantity": 2})]}


def recorded_turn_2(wallet_id: str, tool_messages: list[dict]) -> dict:
    """The model's next turn refunds the debit whose id it read in the tool message."""
    debit_id = json.loads(tool_messages[0]["content"])["result"]["debit_id"]
    return {"role": "assistant", "content": None, "tool_calls": [function_call(
        "call_refund", "wallet_refund",
        {"wallet_id": wallet_id, "debit_id": debit_id, "amount": "40.00", "currency": "EUR"})]}


async def test_the_model_is_handed_each_settled_result_and_takes_its_next_turn(stage, pool):
    principal, run = fresh_principal(), f"run-{uuid.uuid4().hex[:10]}"
    wallet_id = await new_wallet(pool, 10_000)
    sku, order_id = f"SKU-{uuid.uuid4().hex[:10]}", f"tenant/acme/o-{uuid.uuid4().hex[:10]}"
    assert await stock_sku(pool, sku, 5)
    keys = {"call_debit": f"{run}:pay", "call_hold": f"{run}:hold"}
    lost = {"faults": "wallet.after_commit_drop_response=drop@1"}  # the debit's answer
    async with pipeline(stage, wallet=lost), running_warehouse_on(stage), \
            agent(stage, principal) as client:
        turn_1 = await client.propose_openai_chat(run, recorded_turn_1(wallet_id, sku, order_id),
                                                  operation_keys=keys, wait=120)
        tool_messages = to_openai_tool_messages(turn_1)
        [refund] = await client.propose_openai_chat(
            run, recorded_turn_2(wallet_id, tool_messages),
            operation_keys={"call_refund": f"{run}:refund"}, wait=120)
        async with agent(stage, principal) as another_process:  # it read none of it
            repeated = await another_process.propose_openai_chat(  # turn 1 again, new call ids
                run, {**recorded_turn_1(wallet_id, sku, order_id), "tool_calls": [
                    {**call, "id": f"{call['id']}_again"}
                    for call in recorded_turn_1(wallet_id, sku, order_id)["tool_calls"]]},
                operation_keys={f"{k}_again": v for k, v in keys.items()}, wait=120)
    seen = [json.loads(m["content"]) for m in tool_messages]
    assert [(m["tool_call_id"], s["status"]) for m, s in zip(tool_messages, seen, strict=True)] == [
        ("call_debit", "succeeded"), ("call_hold", "succeeded")]
    assert seen[0]["result"]["balance_minor"] == 6_000 and seen[1]["result"]["reservation_id"]
    assert (refund.status, sorted(refund.result or {})) == ("succeeded", ["refund_id"])
    assert await balance(pool, wallet_id) == 10_000 and await debits(pool, wallet_id) == 1
    kinds = [a["kind"] for a in await attempts(pool, turn_1[0].handle.logical_call_id)]
    assert kinds[0] == "send" and "lookup" in kinds  # the lost answer was found out, not guessed
    assert [(o.ledger_status, o.answer.outcome if o.answer else None) for o in repeated] == [
        ("SUCCEEDED", "duplicate"), ("SUCCEEDED", "duplicate")]
    assert [o.result for o in repeated] == [o.result for o in turn_1]  # the originals' results


async def test_an_agent_restarted_while_its_call_settles_resumes_the_handle(stage, pool):
    """Proposed while nothing answers; the process ends with its handle saved as JSON; the
    call settles while no agent reads; the next process resumes the handle and gets it."""
    principal, run = fresh_principal(), f"run-{uuid.uuid4().hex[:10]}"
    wallet_id = await new_wallet(pool, 10_000)
    debit = {"wallet_id": wallet_id, "amount": "25.00", "currency": "EUR"}
    async with agent(stage, principal) as first_process:
        pending = await first_process.call(run, "wallet.debit", debit, call_id="call_1",
                                           operation_key=f"{run}:pay", wait=2)
    assert pending.status == "pending"
    saved = pending.handle.model_dump_json()
    async with pipeline(stage):
        assert await _debited(pool, wallet_id, 7_500), "the call settles meanwhile"
        async with agent(stage, principal) as next_process:
            resumed = await next_process.wait(Handle.model_validate_json(saved), timeout=120)
    assert (resumed.status, resumed.result["balance_minor"]) == ("succeeded", 7_500)
    assert resumed.call_id == "call_1" and resumed.handle.logical_call_id is not None


async def test_a_call_awaiting_approval_is_told_to_the_model_and_settles_once_approved(stage, pool):
    stage.write_policy(APPROVED_DEBITS)
    principal, run = fresh_principal(), f"run-{uuid.uuid4().hex[:10]}"
    wallet_id = await new_wallet(pool, 10_000)
    debit = {"wallet_id": wallet_id, "amount": "40.00", "currency": "EUR"}
    async with pipeline(stage), agent(stage, principal) as client:
        waiting = await client.call(run, "wallet.debit", debit, call_id="call_big",
                                    operation_key=f"{run}:big", wait=120)
        assert (waiting.status, waiting.approval.approvals_required) == ("awaiting_approval", 1)
        [told] = to_openai_tool_messages([waiting])
        shown = json.loads(told["content"])
        assert (shown["status"], shown["approval"]["approvals_required"]) == (
            "awaiting_approval", 1)
        assert await balance(pool, wallet_id) == 10_000, "nothing happens before a person says so"
        await approve(stage, waiting.answer.model_dump(mode="json"), "operator:dana")
        settled = await client.wait(waiting.handle, timeout=120)
    assert (settled.status, settled.result["balance_minor"]) == ("succeeded", 6_000)
    assert await debits(pool, wallet_id) == 1


async def test_an_agent_withdraws_its_own_call_awaiting_approval_and_no_other_agent_can(
        stage, pool):
    """``Client.withdraw``: another agent's withdrawal of the call is refused and changes
    nothing; the proposer's denies it ``call_withdrawn``, and an approval given afterwards
    counts for nothing. A second call is withdrawn by the proposer's next process from a handle
    saved before the intake answered it. Nothing is dispatched, nothing debited."""
    stage.write_policy(APPROVED_DEBITS)
    principal, other, run = fresh_principal(), fresh_principal(), f"run-{uuid.uuid4().hex[:10]}"
    wallet_id = await new_wallet(pool, 10_000)
    debit = {"wallet_id": wallet_id, "amount": "40.00", "currency": "EUR"}
    async with pipeline(stage), agent(stage, principal) as client:
        waiting = await client.call(run, "wallet.debit", debit, call_id="call_big",
                                    operation_key=f"{run}:big", wait=120)
        second = await client.call(run, "wallet.debit", debit, call_id="call_second",
                                   operation_key=f"{run}:second", wait=120)
        assert (waiting.status, second.status) == ("awaiting_approval", "awaiting_approval")
        async with agent(stage, other) as intruder:
            still = await intruder.withdraw(waiting.handle, "not mine to withdraw", wait=5)
        assert still.status == "pending", "no later state: the call still waits for people"

        withdrawn = await client.withdraw(waiting.handle, "the user changed their mind")
        assert (withdrawn.status, withdrawn.reason_code) == ("denied", "call_withdrawn")
        late = await approve(stage, waiting.answer.model_dump(mode="json"), "operator:dana")
        saved = second.handle.model_copy(update={"logical_call_id": None, "settled_after": -1})
        async with agent(stage, principal) as next_process:
            also = await next_process.withdraw(Handle.model_validate_json(
                saved.model_dump_json()), "the user changed their mind about this one too")
        assert (also.status, also.reason_code) == ("denied", "call_withdrawn")
        assert await wait_for(lambda: pool.fetchval(
            "SELECT reason_code FROM policy.approvals WHERE approval_event_id = $1",
            late.event_id), timeout=60) == "approval_not_pending"
    recorded = await pool.fetch(
        "SELECT logical_call_id, principal_id, outcome, reason_code FROM policy.withdrawals"
        " WHERE logical_call_id = ANY($1::uuid[]) ORDER BY received_at",
        [waiting.handle.logical_call_id, second.handle.logical_call_id])
    assert [tuple(row) for row in recorded] == [
        (waiting.handle.logical_call_id, other, "refused", "not_the_proposer"),
        (waiting.handle.logical_call_id, principal, "applied", None),
        (second.handle.logical_call_id, principal, "applied", None)]
    assert await pool.fetchval("SELECT count(*) FROM dispatcher.calls WHERE run_id = $1",
                               run) == 0
    assert await debits(pool, wallet_id) == 0


def runs_on_two_partitions() -> tuple[str, str]:
    """Two run ids whose answers go to different partitions of the tenant's topic."""
    first = f"run-{uuid.uuid4().hex[:10]}"
    place = partial(partition_for, partitions=list(range(RESULTS_PARTITIONS)))
    second = next(run for run in (f"run-{uuid.uuid4().hex[:10]}" for _ in range(100))
                  if place(run.encode()) != place(first.encode()))
    return first, second


async def test_a_key_reused_in_another_run_is_answered_with_the_originals_settled_result(
        stage, pool):
    """The original's states are announced under its own run, on another partition than the
    retry's: the client reads that one too, and finds the result there."""
    principal, (first_run, second_run) = fresh_principal(), runs_on_two_partitions()
    wallet_id = await new_wallet(pool, 10_000)
    debit = {"wallet_id": wallet_id, "amount": "30.00", "currency": "EUR"}
    key = f"{first_run}:pay"
    async with pipeline(stage):
        async with agent(stage, principal) as client:
            original = await client.call(first_run, "wallet.debit", debit, call_id="call_1",
                                         operation_key=key, wait=120)
        async with agent(stage, principal) as another_process:
            again = await another_process.call(second_run, "wallet.debit", debit,
                                               call_id="call_1", operation_key=key, wait=120)
    assert (original.status, again.status) == ("succeeded", "succeeded")
    assert again.answer.outcome == "duplicate" and again.handle.intent_run_id == first_run
    assert again.result == original.result
    assert await debits(pool, wallet_id) == 1


async def _debited(pool, wallet_id: str, expected: int) -> bool:
    from tests.support.kafka import wait_for

    async def done():
        return await balance(pool, wallet_id) == expected
    return bool(await wait_for(done, timeout=120))


async def test_the_example_loop_runs_to_the_models_answer_in_words(stage, pool):
    example = load_example("agent_loop.py")
    principal, run = fresh_principal(), f"run-{uuid.uuid4().hex[:10]}"
    wallet_id = await new_wallet(pool, 10_000)
    sku, order_id = f"SKU-{uuid.uuid4().hex[:10]}", f"tenant/acme/o-{uuid.uuid4().hex[:10]}"
    assert await stock_sku(pool, sku, 5)
    model = example.RecordedModel(wallet_id, sku, order_id)
    async with pipeline(stage), running_warehouse_on(stage), agent(stage, principal) as client:
        messages = await example.loop(client, run, model, "Order two, then cancel.", wait=120)
    assert example.statuses(messages) == {"call_debit": "succeeded", "call_hold": "succeeded",
                                          "call_refund": "succeeded"}
    assert messages[-1]["content"].startswith("Done: ")
    assert await balance(pool, wallet_id) == 10_000 and await debits(pool, wallet_id) == 1
