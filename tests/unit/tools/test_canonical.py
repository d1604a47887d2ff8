"""argumentsHash = SHA-256 of the RFC 8785 bytes of the arguments after the domain rules."""

from __future__ import annotations

import copy
import hashlib
import json

import pytest

from shared.tools import Rejection, RejectionCode, canonicalize

from .builders import example, tool

DEBIT = example().get("wallet.debit", "1")
ARGUMENTS = {"wallet_id": "w-1", "amount": "100.00", "currency": "EUR", "memo": "rent"}


def test_the_hash_is_the_sha256_of_the_canonical_bytes():
    canonical = canonicalize(DEBIT, "acme", ARGUMENTS)
    assert canonical.bytes_ == (b'{"amount":10000,"currency":"EUR","memo":"rent",'
                                b'"wallet_id":"tenant/acme/w-1"}')
    assert canonical.hash == hashlib.sha256(canonical.bytes_).hexdigest()


def test_the_canonical_value_is_exactly_what_was_hashed():
    canonical = canonicalize(DEBIT, "acme", ARGUMENTS)
    assert json.loads(canonical.bytes_) == canonical.value


def test_canonicalizing_neither_changes_nor_shares_the_proposals_arguments():
    arguments = {"account": "a", "amount": 1, "currency": "EUR", "lines": [
        {"price": "1.00", "currency": "EUR", "tags": ["b", "a"]}]}
    before = copy.deepcopy(arguments)
    canonical = canonicalize(tool(canonical=[{"path": "lines[].tags", "kind": "set"}]), "acme", arguments)
    canonical.value["lines"][0]["tags"].append("c")
    assert arguments == before


def test_the_same_arguments_for_two_tenants_hash_differently_when_resources_are_scoped():
    assert canonicalize(DEBIT, "acme", ARGUMENTS).hash != canonicalize(DEBIT, "globex", ARGUMENTS).hash


def test_a_float_and_an_integer_of_equal_value_hash_alike_outside_money_too():
    loose = tool()
    one = canonicalize(loose, "acme", {"account": "a", "amount": 1, "currency": "EUR", "count": 3})
    other = canonicalize(loose, "acme", {"account": "a", "amount": 1.0, "currency": "EUR", "count": 3.0})
    assert one.hash == other.hash


@pytest.mark.parametrize("arguments", [
    ["wallet_id", "w-1"], "w-1", None,
    {"wallet_id": "w-1", "amount": "1.00"},
    {"wallet_id": "w-1", "amount": "1.00", "currency": "EUR", "extra": 1},
    {"wallet_id": 7, "amount": "1.00", "currency": "EUR"},
])
def test_arguments_the_tool_schema_refuses_are_rejected_as_arguments_invalid(arguments):
    with pytest.raises(Rejection) as caught:
        canonicalize(DEBIT, "acme", arguments)
    assert caught.value.code is RejectionCode.ARGUMENTS_INVALID


def test_a_schema_rejection_names_the_offending_path():
    with pytest.raises(Rejection) as caught:
        canonicalize(DEBIT, "acme", {"wallet_id": 7, "amount": "1.00", "currency": "EUR"})
    assert caught.value.message.startswith("$.wallet_id: ")


@pytest.mark.parametrize("count", [2**53, -(2**53), 10**30])
def test_an_integer_beyond_two_to_the_53_is_a_rejection_not_a_crash(count):
    with pytest.raises(Rejection) as caught:
        canonicalize(tool(), "acme", {"account": "a", "amount": 1, "currency": "EUR", "count": count})
    assert caught.value.code is RejectionCode.INTEGER_OUT_OF_RANGE


def test_the_largest_safe_integer_is_accepted():
    canonical = canonicalize(tool(), "acme", {"account": "a", "amount": 1, "currency": "EUR",
                                              "count": 2**53 - 1})
    assert canonical.value["count"] == 2**53 - 1


@pytest.mark.parametrize("number", [float("nan"), float("inf"), float("-inf")])
def test_a_non_finite_number_is_a_rejection(number):
    with pytest.raises(Rejection) as caught:
        canonicalize(tool(), "acme", {"account": "a", "amount": number, "currency": "EUR"})
    assert caught.value.code is RejectionCode.NUMBER_NOT_FINITE


def test_a_lone_surrogate_has_no_canonical_form_and_is_rejected():
    with pytest.raises(Rejection) as caught:
        canonicalize(tool(), "acme", json.loads('{"account": "a", "amount": 1, "currency": "EUR", '
                                                '"note": "\\ud800"}'))
    assert caught.value.code is RejectionCode.ARGUMENTS_INVALID


def test_a_long_rejection_message_is_cut_to_a_bounded_length():
    with pytest.raises(Rejection) as caught:
        canonicalize(DEBIT, "acme", {"wallet_id": "w" * 5000, "amount": "1", "currency": "EUR"})
    assert len(caught.value.message) <= 300
