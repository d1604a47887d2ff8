"""Money canonicalizes to integer minor units of an ISO 4217 currency, and is never rounded."""

from __future__ import annotations

import pytest

from shared.tools import Rejection, RejectionCode, canonicalize
from shared.tools.money import MAX_SAFE_INTEGER

from .builders import tool

LEDGER = tool(canonical=[{"path": "amount", "kind": "money", "minimum_minor": -MAX_SAFE_INTEGER}])
"""A ledger of adjustments: its registry floor admits any amount, so conversion alone is tested."""
POSITIVE = tool(canonical=[{"path": "amount", "kind": "money"}])
UNTYPED = tool(arguments_schema={"type": "object", "properties": {"amount": {}, "currency": {}}},
               canonical=[{"path": "amount", "kind": "money"}])
LINES = tool(canonical=[{"path": "lines[].price", "kind": "money"}])


def money(amount, currency="EUR"):
    value = canonicalize(LEDGER, "acme", {"account": "a", "amount": amount, "currency": currency}).value
    return value["amount"], value["currency"]


def rejected(amount, currency="EUR") -> RejectionCode:
    with pytest.raises(Rejection) as caught:
        money(amount, currency)
    return caught.value.code


@pytest.mark.parametrize("spelling", [100, 100.0, "100", "100.0", "100.00", " 100.00 ", 1e2])
def test_every_spelling_of_one_hundred_euros_is_ten_thousand_cents(spelling):
    assert money(spelling) == (10000, "EUR")


@pytest.mark.parametrize(("amount", "currency", "minor"), [
    ("12.34", "USD", 1234), ("500", "JPY", 500), ("1.234", "KWD", 1234), ("1.5", "BHD", 1500),
    ("0.01", "GBP", 1), ("-7.50", "EUR", -750), ("-0.00", "EUR", 0), ("0.1000", "CLF", 1000),
])
def test_the_currency_exponent_sets_the_minor_unit(amount, currency, minor):
    assert money(amount, currency) == (minor, currency)


def test_a_lower_case_currency_code_means_the_same_currency():
    assert money("1.00", " eur ") == (100, "EUR")


@pytest.mark.parametrize(("amount", "currency"), [
    ("100.001", "EUR"), ("1.5", "JPY"), ("0.0001", "KWD"), (0.30000000000000004, "EUR"), (100.5, "JPY"),
])
def test_more_decimals_than_the_currency_allows_is_refused_not_rounded(amount, currency):
    assert rejected(amount, currency) is RejectionCode.AMOUNT_PRECISION


def test_trailing_zeros_beyond_the_exponent_are_not_extra_precision():
    assert money("100.000000", "JPY") == (100, "JPY")


@pytest.mark.parametrize("currency", ["XYZ", "EURO", "", "€"])
def test_an_unknown_currency_is_refused(currency):
    assert rejected("1.00", currency) is RejectionCode.CURRENCY_UNKNOWN


def test_an_amount_without_a_currency_is_refused_as_currency_unknown():
    with pytest.raises(Rejection) as caught:
        canonicalize(UNTYPED, "acme", {"amount": "1.00"})
    assert caught.value.code is RejectionCode.CURRENCY_UNKNOWN


@pytest.mark.parametrize("amount", ["1e2", "abc", "1,00", "", ".5", "5.", "+5", "١٠٠", "0x10"])
def test_an_amount_that_is_not_a_plain_decimal_is_refused(amount):
    assert rejected(amount) is RejectionCode.AMOUNT_INVALID


@pytest.mark.parametrize("amount", [True, None, [1], {"value": 1}])
def test_a_value_that_is_neither_number_nor_string_is_not_an_amount(amount):
    with pytest.raises(Rejection) as caught:
        canonicalize(UNTYPED, "acme", {"amount": amount, "currency": "EUR"})
    assert caught.value.code is RejectionCode.AMOUNT_INVALID


@pytest.mark.parametrize("amount", ["90071992547409.92", 2**53, "1" + "0" * 400, 1e300])
def test_an_amount_beyond_two_to_the_53_minor_units_is_refused_clearly(amount):
    assert rejected(amount) is RejectionCode.INTEGER_OUT_OF_RANGE


def test_the_largest_safe_amount_is_accepted():
    assert money("90071992547409.91") == (2**53 - 1, "EUR")


def test_a_non_finite_amount_is_refused():
    assert rejected(float("nan")) is RejectionCode.NUMBER_NOT_FINITE


def test_money_inside_array_items_uses_each_items_own_currency():
    value = canonicalize(LINES, "acme", {"account": "a", "amount": 1, "currency": "EUR", "lines": [
        {"price": "1.5", "currency": "usd"}, {"price": 7, "currency": "JPY"}]}).value
    assert value["lines"] == [{"price": 150, "currency": "USD"}, {"price": 7, "currency": "JPY"}]


@pytest.mark.parametrize("amount", ["-40.00", -40, "-0.01", "0", "0.00", "-0.00", 0.0])
def test_a_money_argument_is_positive_unless_the_registry_says_otherwise(amount):
    """A debit of -40.00 EUR used to be accepted, allowed under every cap and dispatched."""
    with pytest.raises(Rejection) as caught:
        canonicalize(POSITIVE, "acme", {"account": "a", "amount": amount, "currency": "EUR"})
    assert caught.value.code == "amount_below_minimum"


def test_the_smallest_positive_amount_is_accepted():
    value = canonicalize(POSITIVE, "acme", {"account": "a", "amount": "0.01", "currency": "EUR"}).value
    assert value["amount"] == 1


def test_a_tool_may_declare_its_own_floor():
    floor = tool(canonical=[{"path": "amount", "kind": "money", "minimum_minor": 500}])
    with pytest.raises(Rejection) as caught:
        canonicalize(floor, "acme", {"account": "a", "amount": "4.99", "currency": "EUR"})
    assert caught.value.code == "amount_below_minimum"
    assert canonicalize(floor, "acme", {"account": "a", "amount": "5", "currency": "EUR"}).value[
        "amount"] == 500
