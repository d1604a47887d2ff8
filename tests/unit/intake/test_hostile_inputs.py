"""Hostile records, end to end through limits and formats: a typed refusal, never a crash."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shared.contracts.proposals import ReasonCode
from tests.unit.intake.pipeline import encoded, example, intake

EXAMPLE_NAMES = ("generic", "openai_chat", "openai_responses", "openai_responses_item", "anthropic")


def generic(**fields) -> bytes:
    return encoded(example("generic") | fields)


def generic_arguments(arguments_json: str) -> bytes:
    """A generic proposal with its arguments spliced in as raw JSON text."""
    return generic(arguments={}).replace(b'"arguments": {}', b'"arguments": ' + arguments_json.encode())


def replaced(raw: bytes, old: bytes, new: bytes) -> bytes:
    assert old in raw
    return raw.replace(old, new)


def chat(*ids: str, arguments: str = "{}", **envelope) -> bytes:
    document = example("openai_chat") | {"operation_keys": None} | envelope
    document["message"]["tool_calls"] = [
        {"id": i, "type": "function", "function": {"name": "wallet_balance", "arguments": arguments}}
        for i in ids]
    return encoded(document)


def custom_call() -> bytes:
    custom = {"id": "call_c", "type": "custom", "custom": {"name": "x", "input": "y"}}
    return chat("call_f").replace(b"}}]", b"}}, " + json.dumps(custom).encode() + b"]")


def anthropic_stopped_by(stop_reason: str) -> bytes:
    document = example("anthropic")
    document["message"]["stop_reason"] = stop_reason
    return encoded(document)


def without(field: str) -> bytes:
    return encoded({k: v for k, v in example("generic").items() if k != field})


DEEP = "[" * 10_000 + "]" * 10_000
CASES = [
    ("oversized record", generic(arguments={f"k{i}": "x" * 60_000 for i in range(5)}), "too_large"),
    ("invalid UTF-8", replaced(generic(), b"acme-retail", b"acme-\xc3\x28"), "not_utf8"),
    ("truncated JSON", generic()[:-10], "not_json"),
    ("10k-deep nesting", generic_arguments(DEEP), "too_deep"),
    ("33-deep nesting", generic_arguments('{"a": ' + "[" * 32 + "]" * 32 + "}"), "too_deep"),
    ("duplicate keys", replaced(generic(), b'"amount_minor": 1999',
                                b'"amount_minor": 1999, "amount_minor": 199900'), "duplicate_key"),
    ("huge string", generic(arguments={"note": "x" * 70_000}), "string_too_long"),
    ("huge array", generic(arguments={"ids": [0] * 5000}), "array_too_long"),
    ("integer of 401 digits", generic_arguments('{"n": 1' + "0" * 400 + "}"), "integer_out_of_range"),
    ("integer of 50k digits", generic_arguments('{"n": ' + "7" * 50_000 + "}"), "integer_out_of_range"),
    ("float overflow", generic_arguments('{"amount": 1e400}'), "number_out_of_range"),
    ("NaN", generic(arguments={"amount": float("nan")}), "not_finite"),
    ("NUL in a string", generic(call_id="step\x003"), "invalid_string"),
    ("lone surrogate", generic(tool="wallet\ud800"), "invalid_string"),
    ("top-level array", b"[]", "unknown_format"),
    ("top-level number", b"42", "unknown_format"),
    ("unknown format", generic(format="openai.assistants"), "unknown_format"),
    ("unknown field", generic(priority="urgent"), "unknown_field"),
    ("missing field", without("principal_id"), "missing_field"),
    ("wrong type", generic(arguments=[1, 2]), "invalid_field"),
    ("tenant nesting under another's topic", generic(tenant_id="acme.eu"), "invalid_tenant_id"),
    ("tenant colliding in metric names", generic(tenant_id="acme_eu"), "invalid_tenant_id"),
    ("tenant in upper case", generic(tenant_id="Acme"), "invalid_tenant_id"),
    ("tenant of 64 chars", generic(tenant_id="a" * 64), "invalid_tenant_id"),
    ("tenant ending in -", generic(tenant_id="acme-"), "invalid_tenant_id"),
    ("empty tenant", generic(tenant_id=""), "invalid_tenant_id"),
    ("tenant not a string", generic(tenant_id=7), "invalid_tenant_id"),
    ("no tool calls", chat(), "no_tool_calls"),
    ("duplicate call ids", chat("call_a", "call_a"), "duplicate_call_id"),
    ("1,024 calls in one message", chat(*(f"call_{n}" for n in range(1024))), "too_many_calls"),
    ("arguments not JSON", chat("call_a", arguments='{"wallet_id": "w-1"'), "arguments_not_json"),
    ("deep arguments text", chat("call_a", arguments='{"a": ' + DEEP + "}"), "too_deep"),
    ("custom tool call", custom_call(), "unsupported_call_type"),
    ("truncated tool use", anthropic_stopped_by("max_tokens"), "call_incomplete"),
    ("one key, two calls", chat("call_a", "call_b", operation_key="k"), "operation_key_ambiguous"),
    ("key for no call", chat("call_a", operation_keys={"call_z": "k"}), "operation_key_unmatched"),
]


@pytest.mark.parametrize("raw, code", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_a_hostile_record_is_refused_with_its_code(raw, code):
    assert intake(raw) == ReasonCode(code)


def test_every_reason_code_is_reached_by_some_record():
    assert {ReasonCode(code) for *_, code in CASES} == set(ReasonCode)


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda children: (st.lists(children, max_size=5)
                      | st.dictionaries(st.text(max_size=10), children, max_size=5)),
    max_leaves=30)


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=2000))
def test_arbitrary_bytes_are_proposals_or_a_typed_refusal(raw):
    assert isinstance(intake(raw), (tuple, ReasonCode))


@settings(max_examples=300, deadline=None)
@given(JSON_VALUES)
def test_arbitrary_json_is_proposals_or_a_typed_refusal(value):
    assert isinstance(intake(json.dumps(value).encode()), (tuple, ReasonCode))


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(EXAMPLE_NAMES), st.data())
def test_any_field_of_a_real_proposal_replaced_by_any_json_is_handled(name, data):
    document = example(name)
    target = document
    while isinstance(target, (dict, list)) and target and data.draw(st.booleans()):
        keys = list(target) if isinstance(target, dict) else list(range(len(target)))
        key = data.draw(st.sampled_from(keys))
        if not isinstance(target[key], (dict, list)) or not target[key]:
            break
        target = target[key]
    if isinstance(target, dict) and target:
        target[data.draw(st.sampled_from([*target, "extra"]))] = data.draw(JSON_VALUES)
    assert isinstance(intake(encoded(document)), (tuple, ReasonCode))


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(EXAMPLE_NAMES), st.binary(min_size=1, max_size=8), st.integers(min_value=0))
def test_a_real_proposal_with_bytes_spliced_in_is_handled(name, junk, position):
    raw = encoded(example(name))
    at = position % len(raw)
    assert isinstance(intake(raw[:at] + junk + raw[at:]), (tuple, ReasonCode))
