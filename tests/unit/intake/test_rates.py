"""Whose rate applies to a message, and what a refusal tells the agent."""

from services.proposal_intake.rates import Rate, Throttled, rates_for
from services.proposal_intake.settings import IntakeSettings


def test_a_tenant_without_limits_of_its_own_gets_the_shipped_defaults():
    assert rates_for("acme", IntakeSettings()) == (Rate(100.0, 1000.0), Rate(20.0, 200.0))


def test_a_tenants_own_rates_replace_only_what_they_name():
    settings = IntakeSettings(tenant_limits={"acme": {"calls_burst": 50,
                                                      "principal_calls_per_second": 2}})
    assert rates_for("acme", settings) == (Rate(100.0, 50.0), Rate(2.0, 200.0))
    assert rates_for("globex", settings) == (Rate(100.0, 1000.0), Rate(20.0, 200.0))


def test_a_refusal_says_when_to_send_again_or_that_waiting_cannot_help():
    assert "send again in 1.5 s" in Throttled("principal", 3, 200, 1.5).message
    assert "smaller messages" in Throttled("tenant", 300, 200, None).message
