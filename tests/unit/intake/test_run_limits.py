"""A run's limits: its tenant's (else the intake's) are ceilings a proposal may lower, never
raise; the attempt budget, unless stated, follows the call budget."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from services.proposal_intake.formats import to_proposals
from services.proposal_intake.handlers import run_limits
from services.proposal_intake.settings import IntakeSettings, TenantLimits
from tests.unit.intake.pipeline import example

NOW = datetime(2026, 12, 2, 9, tzinfo=UTC)
ACME = TenantLimits(max_calls=20, run_seconds=600, cost_limit_minor=10_000, currency="EUR")
SHIPPED = IntakeSettings()


def proposal(budget=None, deadline_at=None):
    document = example("generic") | {"budget": budget, "deadline_at": deadline_at}
    [first] = to_proposals(document)
    return first


def test_a_budget_stated_above_the_tenants_ceiling_gets_the_ceiling():
    """The finding: tenant limits of 20 calls / 600 s / 100.00 EUR, and a proposal that states
    its own budget got 100,000 calls, a cost limit of 2^53-1 and a deadline in the year 9999."""
    limits = run_limits(proposal({"max_calls": 100_000, "max_attempts": 1_000_000,
                                  "cost_limit_minor": 2**53 - 1, "currency": "EUR"},
                                 "9999-12-31T23:59:59Z"), ACME, SHIPPED, NOW)
    assert (limits.max_calls, limits.cost_limit_minor, limits.currency) == (20, 10_000, "EUR")
    assert limits.max_attempts == 40
    assert limits.deadline_at == NOW + timedelta(seconds=600)


def test_a_proposal_may_lower_every_limit():
    deadline = NOW + timedelta(seconds=60)
    limits = run_limits(proposal({"max_calls": 3, "max_attempts": 4, "cost_limit_minor": 500,
                                  "currency": "EUR"}, deadline.isoformat()), ACME, SHIPPED, NOW)
    assert (limits.max_calls, limits.max_attempts, limits.cost_limit_minor) == (3, 4, 500)
    assert limits.deadline_at == deadline


def test_a_cost_limit_in_another_currency_than_the_ceilings_leaves_the_ceiling():
    limits = run_limits(proposal({"cost_limit_minor": 1, "currency": "USD"}), ACME, SHIPPED, NOW)
    assert (limits.cost_limit_minor, limits.currency) == (10_000, "EUR")


def test_without_a_tenant_ceiling_the_intakes_defaults_are_the_ceilings():
    limits = run_limits(proposal({"max_calls": 100_000}), None, SHIPPED, NOW)
    assert limits.max_calls == SHIPPED.default_max_calls == 100
    assert limits.deadline_at == NOW + timedelta(seconds=SHIPPED.default_run_seconds)


@pytest.mark.parametrize("max_calls", [1, 6, 30, 100])
def test_by_default_calls_that_each_succeed_first_time_never_exhaust_the_attempts(max_calls):
    """The shipped default used to be 5 attempts for a 100-call run: the sixth call of a run in
    which nothing failed was denied, and the five applied debits were compensated."""
    limits = run_limits(proposal({"max_calls": max_calls}), None, SHIPPED, NOW)
    assert limits.max_attempts >= limits.max_calls == max_calls
    assert run_limits(proposal(), None, SHIPPED, NOW).max_attempts >= SHIPPED.default_max_calls


def test_a_configured_attempt_budget_is_a_ceiling_too():
    settings = IntakeSettings(default_max_attempts=7)
    assert run_limits(proposal({"max_attempts": 50}), None, settings, NOW).max_attempts == 7
