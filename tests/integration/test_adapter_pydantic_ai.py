"""The Pydantic AI adapter (``intentledger_client.frameworks.pydantic_ai``) on the whole pipeline,
on real Kafka and PostgreSQL, in the agent of ``examples/pydantic_ai_agent.py`` driven by
Pydantic AI's own ``FunctionModel`` (no network; real model requests are disallowed): the
model's debit takes effect once and it reads the settled result; the run resumed from its
history as saved before the debit's result (Pydantic AI runs the pending call again, under its
tool-call id) is answered as the duplicate it is, paying nothing more; a debit the policy denies
reaches the model as a failed tool result with its reason code."""

from __future__ import annotations

import json
import uuid

import pydantic_ai.models
import pytest
from intentledger_client import Outcome
from intentledger_client.frameworks.pydantic_ai import ledger_toolset
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from tests.support.agents import agent, tool_catalog
from tests.support.examples import example
from tests.support.pipeline_stack import pipeline
from tests.support.wallet import balance, debits, new_wallet

pytestmark = pytest.mark.infra
pydantic_ai.models.ALLOW_MODEL_REQUESTS = False  # only the function model may answer


def scripted(*steps: tuple[str, str, str]):
    """Each step a debit (call id, wallet, amount), then an answer in words."""
    steps = iter(steps)

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        step = next(steps, None)
        if step is None:
            return ModelResponse(parts=[TextPart("done")])
        call_id, wallet, amount = step
        return ModelResponse(parts=[ToolCallPart("wallet_debit", {
            "wallet_id": wallet, "amount": amount, "currency": "EUR"}, tool_call_id=call_id)])
    return model


def returns(messages: list[ModelMessage]) -> list:
    """Every tool result the model was handed, in order."""
    return [part for message in messages if isinstance(message, ModelRequest)
            for part in message.parts if getattr(part, "part_kind", None) == "tool-return"]


async def test_a_tool_call_takes_effect_once_a_resumed_run_is_a_duplicate_and_denials_say_why(
        payer_stage, pool):
    stage, run, shop = payer_stage.stage, f"run-{uuid.uuid4().hex[:10]}", example(
        "pydantic_ai_agent.py")
    wallet_id = await new_wallet(pool, 10_000)
    model = FunctionModel(scripted(("call_pay", wallet_id, "40.00"),
                                   ("call_blocked", "blocked-1", "1.00")))
    async with pipeline(stage), agent(stage, payer_stage.payer) as client:
        result = await shop.pay(client, tool_catalog(stage), run, model, "pay")
        saved = result.all_messages()[:2]  # as saved before the debit's result: its call pending
        resumed = await Agent(FunctionModel(scripted())).run(  # Pydantic AI runs the call again
            message_history=saved, toolsets=[ledger_toolset(client, tool_catalog(stage),
                                                            run_id=run, wait=120)])
    paid, denied = returns(result.all_messages())
    [retried] = returns(resumed.new_messages())
    assert result.output == "done" and resumed.output == "done"
    assert (paid.outcome, paid.content["status"], paid.content["result"]["balance_minor"]) == (
        "success", "succeeded", 6_000)
    assert await balance(pool, wallet_id) == 6_000 and await debits(pool, wallet_id) == 1
    assert retried.tool_call_id == "call_pay"
    assert Outcome.model_validate(retried.metadata).answer.outcome == "duplicate"
    assert retried.content == paid.content, "the one intent's result"
    assert (denied.tool_call_id, denied.outcome) == ("call_blocked", "failed")
    assert json.loads(denied.content)["reason_code"] == "denied_by_rule"
