"""A refused document is answered only when it names a run we may answer to."""

from __future__ import annotations

import pytest

from services.proposal_intake.limits import (AMBIGUOUS, LimitViolation, ReplyAddress, check,
                                             reply_address)
from tests.unit.intake.pipeline import example


def test_each_format_yields_its_run_id_and_provider_call_ids():
    assert reply_address(example("generic")) == ReplyAddress("run_01JZ8Q4M7X2KD5W3T9B6N1C0HF",
                                                             ("step-3",), "acme-retail")
    assert reply_address(example("openai_chat")).call_ids == (
        "call_Qm5dW2rT8yLk3vN1pXa7Zc9B", "call_H3nV8kP1sD6fJ0wY4tR2mB5x")
    assert reply_address(example("openai_responses")).call_ids == ("call_Xy7Lp2Qw9Rt4Zk1Mn6Vb3Hd8",)
    assert reply_address(example("openai_responses_item")).call_ids == ("call_Rb4Ns8Kd2Wq6Jm0Tc5Lf9Pz1",)
    assert reply_address(example("anthropic")).call_ids == (
        "toolu_01D7FLrfh4GYq7yT1ULFeyMV", "toolu_01A09q90qw90lq917835lq9")


@pytest.mark.parametrize("document", [
    None, [], "run", {}, {"run_id": ""}, {"run_id": 7}, {"run_id": "r" * 201},
    {"run_id": "a\x00b"}, {"run_id": "\ud800"}, {"run_id": AMBIGUOUS},
])
def test_without_a_usable_run_id_there_is_no_one_to_answer(document):
    assert reply_address(document) is None


@pytest.mark.parametrize("tenant", ["acme.eu", "acme_eu", "Acme", "", 7, None, "a" * 64, "-a"])
def test_a_tenant_id_that_names_no_results_topic_gives_no_tenant_to_answer(tenant):
    assert reply_address({"run_id": "r", "tenant_id": tenant}) == ReplyAddress("r", (), None)


def test_malformed_call_ids_are_left_out_and_repeats_collapse():
    document = {"run_id": "r", "format": "openai.chat", "message": {"tool_calls": [
        {"id": "a"}, {"id": 5}, "junk", {"id": ""}, {"id": "a"}, {"id": "b"}]}}
    assert reply_address(document) == ReplyAddress("r", ("a", "b"))


def test_an_unknown_format_is_answered_without_call_ids():
    assert reply_address({"run_id": "r", "format": "gemini", "call_id": "x"}) == ReplyAddress("r", ())


def test_a_record_with_an_oversized_string_is_still_answered_to_its_run():
    with pytest.raises(LimitViolation) as caught:
        check(b'{"run_id": "r", "format": "generic", "call_id": "c", "note": "' + b"x" * 70_000 + b'"}')
    assert reply_address(caught.value.document) == ReplyAddress("r", ("c",))


def test_a_duplicated_run_id_is_answered_to_no_one():
    with pytest.raises(LimitViolation) as caught:
        check(b'{"run_id": "mine", "run_id": "someone-elses"}')
    assert reply_address(caught.value.document) is None
