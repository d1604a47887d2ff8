"""Every refusal carries a stable code and the call ids it concerns; nothing half-accepted."""

from __future__ import annotations

import pytest

from shared.contracts.proposals import ReasonCode
from services.proposal_intake.formats import ProposalRejection, to_proposals
from tests.unit.intake.pipeline import example


def rejection(document) -> ProposalRejection:
    with pytest.raises(ProposalRejection) as caught:
        to_proposals(document)
    return caught.value


def chat(*tool_calls, **envelope):
    document = example("openai_chat") | envelope
    document.pop("operation_keys")
    document["message"]["tool_calls"] = list(tool_calls)
    return document


def function_call(call_id, arguments='{"wallet_id": "w-1"}', name="wallet_balance"):
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def test_a_message_in_no_known_format_is_an_unknown_format():
    assert rejection(example("generic") | {"format": "gemini"}).code == ReasonCode.UNKNOWN_FORMAT
    document = example("generic")
    del document["format"]
    assert rejection(document).code == ReasonCode.UNKNOWN_FORMAT


def test_an_unknown_envelope_field_is_refused_and_names_the_call():
    refused = rejection(example("generic") | {"operation_kye": "k"})
    assert refused.code == ReasonCode.UNKNOWN_FIELD
    assert "operation_kye" in refused.message
    assert refused.call_ids == ("step-3",)


def test_an_unknown_budget_field_is_refused():
    document = example("generic")
    document["budget"]["max_cost"] = 5
    assert rejection(document).code == ReasonCode.UNKNOWN_FIELD


def test_a_missing_tenant_is_a_missing_field():
    document = example("anthropic")
    del document["tenant_id"]
    refused = rejection(document)
    assert refused.code == ReasonCode.MISSING_FIELD
    assert set(refused.call_ids) == {"toolu_01D7FLrfh4GYq7yT1ULFeyMV", "toolu_01A09q90qw90lq917835lq9"}


@pytest.mark.parametrize("field, value", [
    ("run_id", 42), ("run_id", ""), ("arguments", "{}"), ("arguments", []),
    ("deadline_at", "2026-03-14T09:30:00"), ("deadline_at", 1773480600), ("tool", "wallet debit"),
    ("budget", {"max_calls": "5"}), ("budget", {"max_calls": 0}), ("budget", {"max_calls": True}),
    ("budget", {"cost_limit_minor": 100}), ("budget", {"cost_limit_minor": 1, "currency": "eur"}),
    ("operation_key", ""), ("operation_key", "k" * 201), ("call_id", ["step-3"]),
])
def test_a_field_of_the_wrong_type_or_shape_is_an_invalid_field(field, value):
    assert rejection(example("generic") | {field: value}).code == ReasonCode.INVALID_FIELD


@pytest.mark.parametrize("field", ["run_id", "principal_id", "tenant_id", "call_id",
                                   "operation_key"])
@pytest.mark.parametrize("unprintable", ["\n", "\r", "\x00", "\x1b[31m", "\u0085", "\u2028",
                                         "\u202e", "\u2066", "\u200b", "\ufeff"],
                         ids=["newline", "return", "nul", "escape", "nel", "line separator",
                              "bidi override", "bidi isolate", "zero width", "bom"])
def test_an_id_that_would_not_print_as_itself_is_refused(field, unprintable):
    """A run id with a newline was accepted, broke an HTTP tool's request header (the attempt
    was never recorded) and printed raw to operators' terminals."""
    refused = rejection(example("generic") | {field: f"run{unprintable}1"})
    expected = ReasonCode.INVALID_TENANT_ID if field == "tenant_id" else ReasonCode.INVALID_FIELD
    assert refused.code == expected and field in refused.message


@pytest.mark.parametrize("printable", ["run-ä-1", "commande n°7", "注文-7", "order/7:debit"])
def test_an_id_in_any_script_is_accepted(printable):
    [proposal] = to_proposals(example("generic") | {"run_id": printable})
    assert proposal.run_id == printable


def test_a_message_with_more_calls_than_one_transaction_should_hold_is_refused_whole():
    """One 256 KiB message could carry 1,024 calls, each writing an intent and two outbox rows
    in one transaction; now a message carries at most ``Limits.max_calls``."""
    calls = [function_call(f"call_{n}") for n in range(65)]
    refused = rejection(chat(*calls))
    assert refused.code == ReasonCode.TOO_MANY_CALLS
    assert len(refused.call_ids) == 65  # every call is answered, none is taken
    assert len(to_proposals(chat(*calls[:64]))) == 64


def test_a_user_message_is_not_an_assistant_turn():
    document = example("openai_chat")
    document["message"]["role"] = "user"
    assert rejection(document).code == ReasonCode.INVALID_FIELD


def test_a_turn_without_tool_calls_is_refused():
    assert rejection(chat()).code == ReasonCode.NO_TOOL_CALLS
    document = example("anthropic") | {"operation_keys": None}
    document["message"]["content"] = "Nothing to do."
    assert rejection(document).code == ReasonCode.NO_TOOL_CALLS


def test_repeated_call_ids_in_one_message_are_refused_naming_the_repeated_id():
    refused = rejection(chat(function_call("call_a"), function_call("call_b"), function_call("call_a")))
    assert refused.code == ReasonCode.DUPLICATE_CALL_ID
    assert refused.call_ids == ("call_a",)


@pytest.mark.parametrize("arguments", ['{"wallet_id": ', "", "[1, 2]", '"w-1"', "null", "{'a': 1}"])
def test_arguments_text_that_is_not_a_json_object_is_refused_for_that_call(arguments):
    refused = rejection(chat(function_call("call_ok"), function_call("call_bad", arguments)))
    assert refused.code == ReasonCode.ARGUMENTS_NOT_JSON
    assert refused.call_ids == ("call_bad",)


def test_arguments_text_is_held_to_the_same_limits_as_a_record():
    duplicated = '{"amount_minor": 1, "amount_minor": 1000000}'
    assert rejection(chat(function_call("c", duplicated))).code == ReasonCode.DUPLICATE_KEY
    huge = '{"amount_minor": ' + "9" * 5000 + "}"
    assert rejection(chat(function_call("c", huge))).code == ReasonCode.INTEGER_OUT_OF_RANGE
    deep = "[" * 5000 + "]" * 5000
    assert rejection(chat(function_call("c", '{"a": ' + deep + "}"))).code == ReasonCode.TOO_DEEP


def test_an_openai_custom_tool_call_is_refused_rather_than_left_unanswered():
    custom = {"id": "call_c", "type": "custom", "custom": {"name": "sql", "input": "DROP TABLE x"}}
    refused = rejection(chat(function_call("call_f"), custom))
    assert (refused.code, refused.call_ids) == (ReasonCode.UNSUPPORTED_CALL_TYPE, ("call_c",))
    document = example("openai_responses")
    document["output"].append({"type": "custom_tool_call", "call_id": "call_x", "name": "sql",
                               "input": "SELECT 1"})
    assert rejection(document).code == ReasonCode.UNSUPPORTED_CALL_TYPE


@pytest.mark.parametrize("status", ["in_progress", "incomplete"])
def test_an_unfinished_responses_function_call_is_refused(status):
    document = example("openai_responses")
    document["output"][1]["status"] = status
    refused = rejection(document)
    assert (refused.code, refused.call_ids) == (ReasonCode.CALL_INCOMPLETE,
                                                ("call_Xy7Lp2Qw9Rt4Zk1Mn6Vb3Hd8",))


@pytest.mark.parametrize("stop_reason", ["max_tokens", "model_context_window_exceeded"])
def test_anthropic_tool_use_cut_short_by_a_token_limit_is_refused(stop_reason):
    document = example("anthropic")
    document["message"]["stop_reason"] = stop_reason
    assert rejection(document).code == ReasonCode.CALL_INCOMPLETE


def test_one_operation_key_for_several_calls_is_ambiguous():
    document = chat(function_call("call_a"), function_call("call_b"), operation_key="debit:1")
    refused = rejection(document)
    assert (refused.code, refused.call_ids) == (ReasonCode.OPERATION_KEY_AMBIGUOUS, ("call_a", "call_b"))


def test_operation_key_and_operation_keys_together_are_ambiguous():
    document = example("generic") | {"operation_keys": {"step-3": "refund:order-88213:1"}}
    assert rejection(document).code == ReasonCode.OPERATION_KEY_AMBIGUOUS


def test_an_operation_key_for_a_call_the_message_lacks_is_unmatched():
    document = example("anthropic")
    document["operation_keys"]["toolu_gone"] = "debit:ghost"
    refused = rejection(document)
    assert (refused.code, refused.call_ids) == (ReasonCode.OPERATION_KEY_UNMATCHED, ("toolu_gone",))


def test_a_rejection_message_never_echoes_the_offending_value():
    secret = "sk-live-" + "x" * 40
    refused = rejection(example("generic") | {"run_id": 7, "tenant_id": {"token": secret}})
    assert secret not in refused.message
