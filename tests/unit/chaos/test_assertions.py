"""Judging assertions: each operator, dotted fields, facts at a fault's moment, and what is not
measured never passing."""

from __future__ import annotations

import time

import pytest

from intentledger.chaos.assertions import evaluate, final_facts
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


class _Measurements:
    """Stale writes as a woken worker makes them: none at first, one from the third look."""

    def __init__(self) -> None:
        self.looks = 0

    async def __call__(self) -> Facts:
        self.looks += 1
        return Facts(scenario={"stale_writes": int(self.looks >= 3)})


STALE_WRITE = Assertion(fact="stale_writes", op=">=", value=1, eventually=True)


async def test_an_eventual_assertion_is_measured_again_until_it_holds():
    measure = _Measurements()
    facts = await final_facts(measure, [STALE_WRITE], {}, time.monotonic() + 10, interval_s=0)
    assert (measure.looks, evaluate(STALE_WRITE, facts, {}).holds) == (3, True)


async def test_an_eventual_assertion_that_never_holds_is_judged_at_the_deadline_and_fails():
    measure = _Measurements()
    facts = await final_facts(measure, [STALE_WRITE], {}, time.monotonic(), interval_s=0)
    assert (measure.looks, evaluate(STALE_WRITE, facts, {}).holds) == (1, False)


async def test_without_an_eventual_assertion_the_facts_are_measured_once():
    measure = _Measurements()
    await final_facts(measure, [STALE_WRITE.model_copy(update={"eventually": False})], {},
                      time.monotonic() + 10, interval_s=0)
    assert measure.looks == 1
