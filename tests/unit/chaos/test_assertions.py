"""Judging assertions: each operator, dotted fields, facts at a fault's moment, and what is not
measured never passing."""

from __future__ import annotations

import pytest

from intentledger.chaos.assertions import evaluate
from intentledger.chaos.facts import Facts
from shared.contracts.fault_protocol import Assertion

FINAL = Facts(
    calls={"debit": {"business_effects": 1, "events": ["ProposalAccepted", "ToolEffectReconciled"],
                     "settled": {"status": "SUCCEEDED", "result": {"debit_id": "d-1"}},
                     "state": "SUCCEEDED"}},
    runs={("main", "acme"): {"run_status": "completed", "stop_reason": None},
          ("shared", "acme"): {"run_calls": 2}, ("shared", "globex"): {"run_calls": 1}},
    scenario={"dead_letters": 3, "projection_replay_agrees": True},
    wallets={"tenant/acme/w-${nonce}": 6000})
AT_CRASH = Facts(calls={"debit": {"business_effects": 0}})


def judge(**fields):
    return evaluate(Assertion(**fields), FINAL, {"crash": AT_CRASH})


@pytest.mark.parametrize("fields, holds", [
    ({"fact": "business_effects", "call": "debit", "value": 1}, True),
    ({"fact": "business_effects", "call": "debit", "value": 2}, False),
    ({"fact": "business_effects", "call": "debit", "op": ">=", "value": 1}, True),
    ({"fact": "business_effects", "call": "debit", "op": "<", "value": 1}, False),
    ({"fact": "events", "call": "debit", "op": "contains", "value": "ToolEffectReconciled"}, True),
    ({"fact": "events", "call": "debit", "op": "not_contains", "value": "ProposalAccepted"}, False),
    ({"fact": "state", "call": "debit", "op": "in", "value": ["SUCCEEDED", "FAILED"]}, True),
    ({"fact": "settled", "call": "debit", "field": "status", "value": "SUCCEEDED"}, True),
    ({"fact": "settled", "call": "debit", "field": "result", "op": "not_contains",
      "value": "memo"}, True),
    ({"fact": "run_status", "run": "main", "value": "completed"}, True),
    ({"fact": "dead_letters", "op": ">=", "value": 4}, False),
    ({"fact": "projection_replay_agrees", "value": True}, True),
    ({"fact": "wallet_balance_minor", "wallet": "tenant/acme/w-${nonce}", "value": 6000}, True),
    ({"fact": "business_effects", "call": "debit", "at": "crash", "value": 0}, True),
])
def test_operators_fields_and_moments(fields, holds):
    assert judge(**fields).holds is holds


def test_a_fact_that_was_not_measured_never_holds():
    verdict = judge(fact="settled", call="debit", field="result.memo", op="!=", value="x")
    assert (verdict.holds, verdict.measured) == (False, "not measured")


def test_a_moment_that_never_came_never_holds():
    verdict = evaluate(Assertion(fact="business_effects", call="debit", at="crash", value=0),
                       FINAL, {})
    assert not verdict.holds and "never fired" in verdict.measured


def test_a_comparison_of_incomparable_values_fails_instead_of_raising():
    assert not judge(fact="business_effects", call="debit", op=">", value="many").holds


def test_a_run_fact_is_of_the_named_tenants_run_and_never_of_another_tenants():
    """Runs are named by tenant and run id: two tenants' runs of one name are two runs."""
    assert judge(fact="run_calls", run="shared", tenant="acme", value=2).holds
    assert judge(fact="run_calls", run="shared", tenant="globex", value=1).holds
    ambiguous = judge(fact="run_calls", run="shared", value=1)
    assert (ambiguous.holds, ambiguous.measured) == (False, "not measured")
    assert judge(fact="run_status", run="main", value="completed").holds  # one tenant: its run
