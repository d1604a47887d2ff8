"""Each inbound format becomes one proposal per tool call, named by its provider call id."""

from __future__ import annotations

from datetime import UTC, datetime

from jsonschema import Draft202012Validator

from shared.contracts.proposals import INBOUND_PROPOSAL, Budget
from services.proposal_intake.formats import to_proposals
from tests.unit.intake.pipeline import encoded, example, intake


def by_call_id(document):
    return {p.provider_call_id: p for p in to_proposals(document)}


def test_a_generic_proposal_carries_the_callers_intent_unchanged():
    (proposal,) = to_proposals(example("generic"))
    assert proposal.model_dump() == {
        "run_id": "run_01JZ8Q4M7X2KD5W3T9B6N1C0HF",
        "principal_id": "user:4471",
        "tenant_id": "acme-retail",
        "provider": "generic",
        "provider_call_id": "step-3",
        "tool_name": "wallet.refund",
        "tool_version": "2",
        "arguments": {"wallet_id": "w-4471", "amount_minor": 1999, "currency": "EUR",
                      "order_id": "order-88213"},
        "caller_operation_key": "refund:order-88213:1",
        "deadline_at": datetime(2026, 3, 14, 9, 30, tzinfo=UTC),
        "budget": Budget(max_calls=20, max_attempts=60, cost_limit_minor=50000,
                         currency="EUR").model_dump(),
    }


def test_openai_chat_tool_calls_become_one_proposal_each_with_parsed_arguments():
    proposals = by_call_id(example("openai_chat"))
    debit = proposals["call_Qm5dW2rT8yLk3vN1pXa7Zc9B"]
    balance = proposals["call_H3nV8kP1sD6fJ0wY4tR2mB5x"]
    assert (debit.provider, debit.tool_name, debit.tool_version) == ("openai.chat", "wallet_debit", "1")
    assert debit.arguments == {"wallet_id": "w-4471", "amount_minor": 4250, "currency": "EUR"}
    assert debit.caller_operation_key == "debit:order-88214"
    assert balance.arguments == {"wallet_id": "w-4471"}
    assert balance.caller_operation_key is None


def test_openai_tool_names_are_taken_as_given_not_mapped():
    names = {p.tool_name for p in to_proposals(example("openai_chat"))}
    assert names == {"wallet_debit", "wallet_balance"}


def test_a_deadline_with_an_offset_is_held_in_utc():
    debit = by_call_id(example("openai_chat"))["call_Qm5dW2rT8yLk3vN1pXa7Zc9B"]
    assert debit.deadline_at == datetime(2026, 3, 14, 8, 35, tzinfo=UTC)
    assert debit.deadline_at.utcoffset().total_seconds() == 0


def test_openai_responses_output_yields_its_function_calls_and_skips_reasoning():
    (proposal,) = to_proposals(example("openai_responses"))
    assert proposal.provider == "openai.responses"
    assert proposal.provider_call_id == "call_Xy7Lp2Qw9Rt4Zk1Mn6Vb3Hd8"
    assert proposal.tool_name == "wallet_debit"
    assert proposal.arguments == {"wallet_id": "w-9120", "amount_minor": 1500, "currency": "USD"}
    assert proposal.budget == Budget(max_calls=10)


def test_a_single_responses_item_is_accepted_without_a_list():
    (proposal,) = to_proposals(example("openai_responses_item"))
    assert proposal.provider_call_id == "call_Rb4Ns8Kd2Wq6Jm0Tc5Lf9Pz1"
    assert proposal.caller_operation_key == "invoice:INV-2026-0042"


def test_a_responses_call_is_named_by_call_id_not_by_its_item_id():
    (proposal,) = to_proposals(example("openai_responses_item"))
    assert not proposal.provider_call_id.startswith("fc_")


def test_anthropic_tool_use_blocks_become_proposals_and_text_is_ignored():
    proposals = by_call_id(example("anthropic"))
    assert set(proposals) == {"toolu_01D7FLrfh4GYq7yT1ULFeyMV", "toolu_01A09q90qw90lq917835lq9"}
    refund = proposals["toolu_01A09q90qw90lq917835lq9"]
    assert (refund.provider, refund.tool_name) == ("anthropic", "wallet_refund")
    assert refund.arguments["order_id"] == "order-88190"
    assert refund.caller_operation_key == "refund:order-88190:1"


def test_per_call_operation_keys_follow_the_call_id_when_the_calls_are_reordered():
    document = example("anthropic")
    content = document["message"]["content"]
    document["message"]["content"] = [content[0], content[2], content[1]]
    original = {p.provider_call_id: p.caller_operation_key for p in to_proposals(example("anthropic"))}
    reordered = {p.provider_call_id: p.caller_operation_key for p in to_proposals(document)}
    assert reordered == original


def test_new_provider_fields_on_provider_objects_are_tolerated():
    document = example("openai_chat")
    document["message"]["audio"] = None
    document["message"]["tool_calls"][0]["index"] = 0
    document["message"]["tool_calls"][0]["function"]["strict"] = True
    assert len(to_proposals(document)) == 2


def test_every_example_survives_the_byte_level_limits():
    for name in ("generic", "openai_chat", "openai_responses", "openai_responses_item", "anthropic"):
        assert isinstance(intake(encoded(example(name))), tuple), name


def test_every_example_validates_against_the_generated_json_schema():
    validator = Draft202012Validator(INBOUND_PROPOSAL.json_schema())
    for name in ("generic", "openai_chat", "openai_responses", "openai_responses_item", "anthropic"):
        assert not list(validator.iter_errors(example(name))), name
