"""The Pydantic AI adapter (``intentledger_client.frameworks.pydantic_ai``) on the whole pipeline,
on real Kafka and PostgreSQL, in the agent of ``examples/pydantic_ai_agent.py`` driven by
Pydantic AI's own ``FunctionModel`` (no network; real model requests are disallowed): the
model's debit takes effect once and it reads the settled result; the model calling it again
under the same tool-call id (Pydantic AI's retry of a call) is answered as the duplicate it is,
paying nothing more; a debit the policy denies reaches the model as a failed tool result with
its reason code."""

from __future__ import annotations

import json
import uuid

import pydantic_ai.models
import pytest
from intentledger_client import Outcome
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from tests.support.agents import agent, tool_catalog
from tests.support.examples import example
from tests.support.pipeline_stack import pipeline
from tests.support.wallet import balance, debits, new_wallet

pytestmark = pytest.mark.infra
pydantic_ai.models.ALLOW_MODEL_REQUESTS = False  # only the function model may answer


def scripted(wallet_id: str):
    """Pay, pay again under the same id (a retry), try a blocked wallet, answer in words."""
    steps = iter([("call_pay", wallet_id, "40.00"), ("call_pay", wallet_id, "40.00"),
                  ("call_blocked", "blocked-1", "1.00")])

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


async def test_a_tool_call_takes_effect_once_a_retry_is_a_duplicate_and_denials_say_why(
        payer_stage, pool):
    stage, run = payer_stage.stage, f"run-{uuid.uuid4().hex[:10]}"
    wallet_id = await new_wallet(pool, 10_000)
    async with pipeline(stage), agent(stage, payer_stage.payer) as client:
        result = await example("pydantic_ai_agent.py").pay(
            client, tool_catalog(stage), run, FunctionModel(scripted(wallet_id)), "pay")
    paid, retried, denied = returns(result.all_messages())
    assert result.output == "done"
    assert (paid.outcome, paid.content["status"], paid.content["result"]["balance_minor"]) == (
        "success", "succeeded", 6_000)
    assert await balance(pool, wallet_id) == 6_000 and await debits(pool, wallet_id) == 1
    assert Outcome.model_validate(retried.metadata).answer.outcome == "duplicate"
    assert retried.content == paid.content, "the one intent's result"
    assert (denied.tool_call_id, denied.outcome) == ("call_blocked", "failed")
    assert json.loads(denied.content)["reason_code"] == "denied_by_rule"
