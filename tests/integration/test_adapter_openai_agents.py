"""The OpenAI Agents SDK adapter (``intentledger_client.frameworks.openai_agents``) on the whole
pipeline, on real Kafka and PostgreSQL, in the agent of ``examples/openai_agents_agent.py``
driven by the SDK's own offline model (``agents.testing.ScriptedModel``: no network, no API
key): the model's debit takes effect once and it reads the settled result; the same turn run
again (a worker restarted mid-turn replays it, with the model's call ids) is answered from the
one intent, paying nothing more; a debit the policy denies reaches the model with its reason
code."""

from __future__ import annotations

import json
import uuid

import pytest
from agents.testing import ScriptedModel, assistant_message, function_call

from tests.support.agents import agent, tool_catalog
from tests.support.examples import example
from tests.support.pipeline_stack import pipeline
from tests.support.wallet import balance, debits, new_wallet

pytestmark = pytest.mark.infra


def turn(wallet_id: str) -> list:
    """Pay 40.00 EUR, then try a blocked wallet, then answer in words."""
    return [[function_call("wallet_debit", {"wallet_id": wallet_id, "amount": "40.00",
                                            "currency": "EUR"}, call_id="call_pay")],
            [function_call("wallet_debit", {"wallet_id": "blocked-1", "amount": "1.00",
                                            "currency": "EUR"}, call_id="call_blocked")],
            [assistant_message("done")]]


def outputs(model: ScriptedModel) -> dict[str, dict]:
    """What the model was handed for each call: the tool outputs in its last input."""
    return {item["call_id"]: json.loads(item["output"]) for item in model.calls[-1].input
            if isinstance(item, dict) and item.get("type") == "function_call_output"}


async def test_a_tool_call_takes_effect_once_a_replay_is_a_duplicate_and_denials_say_why(
        payer_stage, pool):
    stage, run = payer_stage.stage, f"run-{uuid.uuid4().hex[:10]}"
    shop = example("openai_agents_agent.py")
    wallet_id = await new_wallet(pool, 10_000)
    first, replayed = ScriptedModel(turn(wallet_id)), ScriptedModel(turn(wallet_id))
    async with pipeline(stage), agent(stage, payer_stage.payer) as client:
        result = await shop.pay(client, tool_catalog(stage), run, first)
        again = await shop.pay(client, tool_catalog(stage), run, replayed)
    first.assert_complete()
    seen, seen_again = outputs(first), outputs(replayed)
    assert result.final_output == "done" and again.final_output == "done"
    assert (seen["call_pay"]["status"], seen["call_pay"]["result"]["balance_minor"]) == (
        "succeeded", 6_000)
    assert await balance(pool, wallet_id) == 6_000 and await debits(pool, wallet_id) == 1
    assert seen_again["call_pay"] == seen["call_pay"], "the replay reads the one intent's result"
    assert (seen["call_blocked"]["status"], seen["call_blocked"]["reason_code"]) == (
        "denied", "denied_by_rule")
