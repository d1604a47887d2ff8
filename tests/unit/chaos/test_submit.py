"""Proposals become model turns the way providers shape them: parallel calls share a message."""

from __future__ import annotations

import json

from intentledger.chaos.submit import _message, turns
from shared.contracts.fault_protocol import Proposal


def proposal(name: str, message: str | None = None, **extra) -> Proposal:
    return Proposal(name=name, tool="wallet_debit", arguments={"amount": name},
                    format="openai.chat" if message else "generic", message=message, **extra)


def test_calls_of_one_message_travel_together_at_the_place_of_the_first():
    a, b, c, d = proposal("a", "m1"), proposal("b"), proposal("c", "m1"), proposal("d", "m2")
    assert [[p.name for p in turn] for turn in turns([a, b, c, d])] == [["a", "c"], ["b"], ["d"]]


def test_openai_turn_carries_each_call_with_its_own_id_and_json_arguments():
    message = _message("openai.chat", [proposal("a", "m", call_id="call_1"), proposal("b", "m")])
    calls = message["tool_calls"]
    assert [c["id"] for c in calls] == ["call_1", "b"]
    assert json.loads(calls[0]["function"]["arguments"]) == {"amount": "a"}


def test_anthropic_turn_carries_tool_use_blocks():
    turn = [Proposal(name="a", tool="wallet_debit", arguments={"x": 1}, format="anthropic",
                     message="m", call_id="toolu_1")]
    assert _message("anthropic", turn)["content"] == [
        {"type": "tool_use", "id": "toolu_1", "name": "wallet_debit", "input": {"x": 1}}]


def test_openai_responses_turn_carries_function_call_items_paired_by_call_id():
    turn = [Proposal(name="a", tool="wallet_debit", arguments={"x": 1}, format="openai.responses",
                     message="m", call_id="call_9")]
    [item] = _message("openai.responses", turn)["output"]
    assert (item["type"], item["call_id"], json.loads(item["arguments"])) == (
        "function_call", "call_9", {"x": 1})
