"""The tools each caller is offered: the registry's, as MCP declares them, filtered by what the
policy could ever allow the caller."""

from __future__ import annotations

from pathlib import Path

from services.mcp_gateway.callers import Caller
from services.mcp_gateway.catalog import (KEY_ARGUMENT, OUTCOME_TOOL, input_schema, mcp_tool,
                                          offered, offers, split_key)
from shared.policy.loader import load_policy
from shared.tools import load_registry

CONFIG = Path(__file__).resolve().parents[3] / "config"
REGISTRY = load_registry(CONFIG / "tools.example.yaml")
POLICY = load_policy(CONFIG / "policy.example.yaml")


def names(caller: Caller) -> set[str]:
    return {tool.name for tool in offered(REGISTRY, POLICY, caller)}


def test_the_example_agent_is_offered_what_the_example_policy_lets_it_do():
    assert names(Caller("agent-7", "acme")) == {
        "wallet.debit", "wallet.refund", "email.send", "inventory.reserve", OUTCOME_TOOL}


def test_a_caller_no_rule_allows_anything_is_offered_only_the_outcome_tool():
    assert names(Caller("agent-8", "acme")) == {OUTCOME_TOOL}  # acme-others-denied
    assert names(Caller("agent-7", "globex")) == {OUTCOME_TOOL}  # no rule at all
    assert offers(REGISTRY, POLICY, Caller("agent-8", "acme"), "wallet.debit") is None
    assert offers(REGISTRY, POLICY, Caller("agent-7", "acme"), "wallet.debit").name == "wallet.debit"


def test_an_mcp_tool_keeps_its_name_its_argument_schema_and_an_object_result_schema():
    refund = REGISTRY.resolve("wallet.refund", None)  # its key derives from its arguments
    tool = mcp_tool(refund)
    assert (tool.name, tool.input_schema, tool.output_schema) == (
        "wallet.refund", refund.arguments_schema, refund.result_schema)
    assert input_schema(REGISTRY, "wallet.refund") == refund.arguments_schema
    assert input_schema(REGISTRY, "nope") is None
    scalar = refund.model_copy(update={"result_schema": {"type": "string"}})
    assert mcp_tool(scalar).output_schema is None, "MCP output schemas describe objects only"


def test_a_tool_whose_caller_states_the_key_takes_it_as_an_argument_taken_out_before_proposing():
    debit = REGISTRY.resolve("wallet.debit", None)
    schema = mcp_tool(debit).input_schema
    assert schema["properties"].keys() == debit.arguments_schema["properties"].keys() | {
        KEY_ARGUMENT}
    assert schema["required"] == debit.arguments_schema["required"]
    assert KEY_ARGUMENT not in debit.arguments_schema["properties"], "the registry is untouched"
    assert input_schema(REGISTRY, "wallet.debit") == schema
    called = {"wallet_id": "w-1", "amount": "1.00", "currency": "EUR", KEY_ARGUMENT: "o-7:pay"}
    own, key = split_key(debit, called)
    assert (own, key) == ({"wallet_id": "w-1", "amount": "1.00", "currency": "EUR"}, "o-7:pay")
    debit.validate_arguments(own)
    refund = REGISTRY.resolve("wallet.refund", None)
    assert split_key(refund, {"debit_id": "d", KEY_ARGUMENT: "k"}) == (
        {"debit_id": "d", KEY_ARGUMENT: "k"}, None), "not its argument: the intake judges it"
    own_named = debit.model_copy(update={"arguments_schema": {
        **debit.arguments_schema, "properties": {
            **debit.arguments_schema["properties"], KEY_ARGUMENT: {"type": "integer"}}}})
    assert mcp_tool(own_named).input_schema == own_named.arguments_schema
    assert split_key(own_named, {KEY_ARGUMENT: 3}) == ({KEY_ARGUMENT: 3}, None)


def test_a_tool_run_in_several_versions_is_not_offered():
    debit = REGISTRY.resolve("wallet.debit", None)
    twice = REGISTRY.model_copy(update={"tools": (*REGISTRY.tools,
                                                  debit.model_copy(update={"version": "2"}))})
    assert "wallet.debit" not in {t.name for t in offered(twice, POLICY, Caller("agent-7", "acme"))}


def test_the_hints_follow_the_effect_class_and_the_key_scheme():
    tools = {name: mcp_tool(REGISTRY.resolve(name, None)).annotations
             for name in ("email.send", "wallet.debit", "wallet.refund")}
    assert tools["email.send"].destructive_hint and not tools["wallet.debit"].destructive_hint
    assert not tools["wallet.debit"].idempotent_hint, "its key is the caller's: a new key, a new debit"
    assert tools["wallet.refund"].idempotent_hint
    assert not any(hints.read_only_hint for hints in tools.values())
