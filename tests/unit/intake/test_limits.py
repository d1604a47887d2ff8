"""The byte-level limits refuse hostile records before any model sees them."""

from __future__ import annotations

import json

import pytest

from shared.contracts.proposals import ReasonCode
from services.proposal_intake.limits import (AMBIGUOUS, MAX_SAFE_INTEGER, LimitViolation, Limits,
                                             check)

SMALL = Limits(max_bytes=1000, max_depth=3, max_string_chars=10, max_array_items=4)


def violation(raw: bytes, limits: Limits = SMALL) -> LimitViolation:
    with pytest.raises(LimitViolation) as caught:
        check(raw, limits)
    return caught.value


def test_the_defaults_are_the_documented_ones():
    assert Limits() == Limits(max_bytes=262144, max_depth=32, max_string_chars=65536,
                              max_array_items=1024)


def test_a_document_within_every_limit_is_returned_parsed():
    raw = b'{"a": [1, -2.5, null, "0123456789"], "b": {"c": [true]}}'
    assert check(raw, SMALL) == json.loads(raw)


def test_exactly_at_each_limit_is_still_accepted():
    at_limits = {"k": [[1, 2, 3, "x" * 10]]}
    assert check(json.dumps(at_limits).encode(), SMALL) == at_limits
    assert check(str(MAX_SAFE_INTEGER).encode()) == MAX_SAFE_INTEGER
    assert check(str(-MAX_SAFE_INTEGER).encode()) == -MAX_SAFE_INTEGER


@pytest.mark.parametrize("raw, code", [
    (b"{}" + b" " * 999, ReasonCode.TOO_LARGE),
    (b'{"a": "\xff"}', ReasonCode.NOT_UTF8),
    (b'{"a": "\xed\xa0\x80"}', ReasonCode.NOT_UTF8),
    (b'{"a": 1', ReasonCode.NOT_JSON),
    (b"", ReasonCode.NOT_JSON),
    (b'\xef\xbb\xbf{"a": 1}', ReasonCode.NOT_JSON),
    (b'{"a": {"b": {"c": {}}}}', ReasonCode.TOO_DEEP),
    (b"[[[[]]]]", ReasonCode.TOO_DEEP),
    (b'{"a": 1, "a": 2}', ReasonCode.DUPLICATE_KEY),
    (b'{"a": "01234567890"}', ReasonCode.STRING_TOO_LONG),
    (b'{"01234567890": 1}', ReasonCode.STRING_TOO_LONG),
    (b"[1, 2, 3, 4, 5]", ReasonCode.ARRAY_TOO_LONG),
    (b"9007199254740992", ReasonCode.INTEGER_OUT_OF_RANGE),
    (b"-9007199254740992", ReasonCode.INTEGER_OUT_OF_RANGE),
    (b"[1e400]", ReasonCode.NUMBER_OUT_OF_RANGE),
    (b"[-1e400]", ReasonCode.NUMBER_OUT_OF_RANGE),
    (b"[NaN]", ReasonCode.NOT_FINITE),
    (b"[-Infinity]", ReasonCode.NOT_FINITE),
    (b'["a\\u0000b"]', ReasonCode.INVALID_STRING),
    (b'["\\ud800"]', ReasonCode.INVALID_STRING),
    (b'{"\\udfff": 1}', ReasonCode.INVALID_STRING),
])
def test_each_limit_has_its_own_code(raw, code):
    assert violation(raw).code == code


def test_an_integer_beyond_pythons_digit_limit_is_out_of_range_not_a_crash():
    assert violation(b"[" + b"1" + b"0" * 400 + b"]", Limits()).code == ReasonCode.INTEGER_OUT_OF_RANGE
    assert violation(b"[" + b"9" * 100_000 + b"]", Limits()).code == ReasonCode.INTEGER_OUT_OF_RANGE


def test_nesting_beyond_the_parsers_recursion_limit_is_too_deep_without_a_document():
    refused = violation(b"[" * 100_000 + b"]" * 100_000, Limits(max_bytes=1 << 20))
    assert (refused.code, refused.document) == (ReasonCode.TOO_DEEP, None)


def test_nesting_the_parser_can_read_keeps_its_document_for_the_reply():
    raw = b'{"run_id": "r", "x": ' + b"[" * 500 + b"]" * 500 + b"}"
    refused = violation(raw, Limits())
    assert refused.code == ReasonCode.TOO_DEEP
    assert refused.document["run_id"] == "r"


def test_unreadable_records_carry_no_document():
    for raw in (b"{}" + b" " * 999, b"\xff", b"{"):
        assert violation(raw).document is None


def test_a_duplicated_key_stands_for_no_value_at_all():
    refused = violation(b'{"run_id": "a", "run_id": "b", "other": 1}')
    assert refused.document == {"run_id": AMBIGUOUS, "other": 1}


def test_the_message_of_a_violation_is_short_even_for_huge_input():
    refused = violation(b'{"' + b"k" * 100_000 + b'": 1, "' + b"k" * 100_000 + b'": 2}',
                        Limits(max_string_chars=200_000))
    assert refused.code == ReasonCode.DUPLICATE_KEY
    assert len(refused.message) < 200
