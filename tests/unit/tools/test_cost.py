"""A tool's cost is the money one call moves, read from its canonical arguments."""

from __future__ import annotations

import pytest

from shared.tools import canonicalize

from .builders import entry, refusal, tool

MONEY = [{"path": "amount", "kind": "money"}]


def test_the_cost_is_the_canonical_amount_and_currency():
    spec = tool(canonical=MONEY, cost_from="amount")
    canonical = canonicalize(spec, "acme", {"account": "a", "amount": "12.5", "currency": "eur"})
    assert spec.cost_of(canonical.value) == (1250, "EUR")


def test_a_negative_amount_a_tool_admits_costs_what_it_moves():
    """Caps, velocity limits and run budgets compare and add magnitudes, never a negative."""
    spec = tool(canonical=[{"path": "amount", "kind": "money", "minimum_minor": -100_000}],
                cost_from="amount")
    canonical = canonicalize(spec, "acme", {"account": "a", "amount": "-40.00", "currency": "EUR"})
    assert canonical.value["amount"] == -4000
    assert spec.cost_of(canonical.value) == (4000, "EUR")


def test_a_tool_without_cost_from_costs_nothing():
    spec = tool(canonical=MONEY)
    canonical = canonicalize(spec, "acme", {"account": "a", "amount": "1", "currency": "EUR"})
    assert spec.cost_of(canonical.value) is None


@pytest.mark.parametrize("cost_from, canonical", [
    ("note", MONEY),                                        # not a money rule
    ("lines[].price", [{"path": "lines[].price", "kind": "money"}]),  # inside a list
])
def test_cost_from_must_name_a_money_rule_outside_lists(cost_from, canonical):
    assert "cost_from" in refusal({"tools": [entry(canonical=canonical, cost_from=cost_from)]})
