"""The forward path as a table: from AUTHORIZED to an attempt, and what its answer means.
No PostgreSQL: ``decide`` is given the rows a step reads and its actions are compared."""

from __future__ import annotations

import uuid
from dataclasses import replace
from datetime import timedelta

import pytest

from services.dispatcher.breaker import Breakers
from services.dispatcher.capacity import CAPACITY_RECHECK_S, Capacity
from services.dispatcher.decide.actions import Move, StartAttempt, WaitForCapacity
from services.dispatcher.states import CALL_TRANSITIONS
from shared.contracts.dispatch import CallState as S
from tests.unit.dispatcher.situations import (LATER, SETTINGS, a_call, an_attempt, applied,
                                              decided, summary)
from tests.unit.dispatcher.test_dispatch_rules import KEYS, NOW, REGISTRY, RUN

DEBIT = REGISTRY.resolve("wallet.debit", "1")
OVER_HTTP = DEBIT.model_copy(update={"adapter": "http", "http_url": "http://wallet.test/debit"})
OPEN = Breakers(1, timedelta(seconds=60))
OPEN.failed("kafka:" + DEBIT.topic, LATER)
WALLET = uuid.uuid4()


def slots(in_use: int, in_line: int = 0, bound: int = 2) -> Capacity:
    """wallet.debit's slots as a batch sees them."""
    capacity = Capacity({"wallet.debit": bound})
    capacity.in_use["wallet.debit"], capacity.in_line["wallet.debit"] = in_use, in_line
    return capacity


TABLE = {
    "an authorized call of a Kafka tool records its intent, then sends in the same step":
        (dict(call=a_call(S.AUTHORIZED)),
         ["INTENT_RECORDED by DispatchIntentRecorded", "send -> DISPATCHING"]),
    "an authorized call of an HTTP tool records its intent alone, committed before any send":
        (dict(call=a_call(S.AUTHORIZED), tool=OVER_HTTP),
         ["INTENT_RECORDED by DispatchIntentRecorded", "then intent_recorded"]),
    "an open breaker records the intent and postpones the send":
        (dict(call=a_call(S.AUTHORIZED), breakers=OPEN),
         ["INTENT_RECORDED by DispatchIntentRecorded", "wait"]),
    "a run out of attempts records the intent and stops without undoing":
        (dict(call=a_call(S.AUTHORIZED), run=replace(RUN, attempts_used=RUN.max_attempts)),
         ["INTENT_RECORDED by DispatchIntentRecorded",
          "DENIED by DispatchRefused (run_attempt_budget_exhausted)",
          "stop run (run_attempt_budget_exhausted) keeping done steps", "saga"]),
    "an authorized call past its deadline expires, keeping the run's done steps":
        (dict(call=a_call(S.AUTHORIZED), now=NOW + timedelta(hours=2)),
         ["EXPIRED by DispatchRefused (run_deadline_passed)",
          "stop run (run_deadline_passed) keeping done steps", "saga"]),
    "a call of an aborted run is refused without stopping it again":
        (dict(call=a_call(S.AUTHORIZED), run=replace(RUN, aborted_at=NOW, abort_reason="x")),
         ["DENIED by DispatchRefused (run_aborted)"]),
    "a compensation waits for the policy's answer":
        (dict(call=a_call(S.AUTHORIZED, compensates=WALLET, capability=False)), ["wait"]),
    "a compensation the policy refused fails its original":
        (dict(call=replace(a_call(S.AUTHORIZED, compensates=WALLET, capability=False),
                           policy_refusal={"reason_code": "no_rule_matched", "message": "no"})),
         ["DENIED by DispatchRefused (compensation_not_authorized)",
          "original COMPENSATION_FAILED", "saga"]),
    "a tool the registry dropped is refused before any attempt":
        (dict(call=a_call(S.AUTHORIZED), unregistered=True),
         ["DENIED by DispatchRefused (unknown_tool)", "stop run (unknown_tool)", "saga"]),
    "a tool with every slot in flight records the intent and puts its send in line":
        (dict(call=a_call(S.AUTHORIZED), capacity=slots(in_use=2)),
         ["INTENT_RECORDED by DispatchIntentRecorded", "in line"]),
    "a tool with a free slot sends at once":
        (dict(call=a_call(S.AUTHORIZED), capacity=slots(in_use=1)),
         ["INTENT_RECORDED by DispatchIntentRecorded", "send -> DISPATCHING"]),
    "a new send goes behind the calls in line, even when a slot is free":
        (dict(call=a_call(S.INTENT_RECORDED), capacity=slots(in_use=1, in_line=3)),
         ["in line"]),
    "a call in line takes a free slot":
        (dict(call=replace(a_call(S.INTENT_RECORDED), capacity="waiting"),
              capacity=slots(in_use=1, in_line=3)), ["send -> DISPATCHING"]),
    "a call in line stays in line while every slot is in flight":
        (dict(call=replace(a_call(S.INTENT_RECORDED), capacity="waiting"),
              capacity=slots(in_use=2, in_line=3)), ["in line"]),
    "an admitted call uses the slot kept for it":
        (dict(call=replace(a_call(S.INTENT_RECORDED), capacity="admitted"),
              capacity=slots(in_use=2, in_line=3)), ["send -> DISPATCHING"]),
    "a call in line that has run out of time expires, unsent":
        (dict(call=replace(a_call(S.INTENT_RECORDED, deadline_at=NOW + timedelta(seconds=60)),
                           capacity="waiting"),
              now=NOW + timedelta(seconds=60 - SETTINGS.recovery_reserve_s),
              capacity=slots(in_use=2)),
         ["EXPIRED by DispatchRefused (run_deadline_passed)",
          "stop run (run_deadline_passed) keeping done steps", "saga"]),
    "a retry after a transient answer waits in line like a new send":
        (dict(call=a_call(S.DISPATCHING, attempts=1), attempts=[an_attempt(1, status="transient")],
              capacity=slots(in_use=2)), ["in line"]),
    "a recorded intent is sent":
        (dict(call=a_call(S.INTENT_RECORDED)), ["send -> DISPATCHING"]),
    "a run out of attempts stops without undoing":
        (dict(call=a_call(S.INTENT_RECORDED), run=replace(RUN, attempts_used=RUN.max_attempts)),
         ["DENIED by DispatchRefused (run_attempt_budget_exhausted)",
          "stop run (run_attempt_budget_exhausted) keeping done steps", "saga"]),
    "too little time before the recovery reserve expires the call":
        (dict(call=a_call(S.INTENT_RECORDED, deadline_at=NOW + timedelta(seconds=60)),
              now=NOW + timedelta(seconds=60 - SETTINGS.recovery_reserve_s)),
         ["EXPIRED by DispatchRefused (run_deadline_passed)",
          "stop run (run_deadline_passed) keeping done steps", "saga"]),
    "an open breaker postpones the send instead of spending it":
        (dict(call=a_call(S.INTENT_RECORDED), breakers=OPEN), ["wait"]),
    "an unanswered attempt waits for its deadline":
        (dict(call=a_call(S.DISPATCHING, attempts=1), attempts=[an_attempt(1)], now=NOW),
         ["wait"]),
    "no answer by the deadline is UNKNOWN, never FAILED":
        (dict(call=a_call(S.DISPATCHING, attempts=1), attempts=[an_attempt(1)]),
         ["#1 unknown", "extend work", "UNKNOWN by ToolOutcomeMarkedUnknown"]),
    "an HTTP response lost with its worker is UNKNOWN at once":
        (dict(call=a_call(S.DISPATCHING, attempts=1), attempts=[an_attempt(1)], now=NOW,
              fence=2, tool=OVER_HTTP),
         ["#1 unknown", "extend work", "UNKNOWN by ToolOutcomeMarkedUnknown"]),
    "an applied receipt succeeds and records the effect":
        (dict(call=a_call(S.DISPATCHING, attempts=1), attempts=[applied()]),
         ["SUCCEEDED by ToolResultRecorded", "effect of #1"]),
    "an answer that comes after its run stopped to undo its steps is undone too":
        (dict(call=a_call(S.DISPATCHING, attempts=1), attempts=[applied()],
              run=replace(RUN, aborted_at=NOW, abort_reason="x", compensates=True)),
         ["SUCCEEDED by ToolResultRecorded", "effect of #1", "saga"]),
    "an answer that comes after its run stopped keeping its steps is kept":
        (dict(call=a_call(S.DISPATCHING, attempts=1), attempts=[applied()],
              run=replace(RUN, aborted_at=NOW, abort_reason="x", compensates=False)),
         ["SUCCEEDED by ToolResultRecorded", "effect of #1"]),
    "a replayed receipt names the attempt that applied the effect":
        (dict(call=a_call(S.DISPATCHING, attempts=2),
              attempts=[an_attempt(1, status="transient"),
                        applied(2, replayed=True, settled_by_attempt=1)]),
         ["SUCCEEDED by ToolResultRecorded", "effect of #1"]),
    "a result that breaks the tool's schema goes to a person":
        (dict(call=a_call(S.DISPATCHING, attempts=1),
              attempts=[an_attempt(1, status="applied", receipt={"result": {"x": 1}})]),
         ["MANUAL_REVIEW by ManualReviewRequired (result_invalid)"]),
    "a rejection fails the call and undoes the run's done steps":
        (dict(call=a_call(S.DISPATCHING, attempts=1),
              attempts=[an_attempt(1, status="rejected", receipt={"reason": "insufficient"})]),
         ["FAILED by ToolResultRecorded (rejected_by_tool)", "stop run (rejected_by_tool)",
          "saga"]),
    "a request refused for arriving late is sent again":
        (dict(call=a_call(S.DISPATCHING, attempts=1),
              attempts=[an_attempt(1, status="rejected", receipt={"reason": "deadline_passed"})]),
         ["send -> DISPATCHING"]),
    "a transient answer is retried":
        (dict(call=a_call(S.DISPATCHING, attempts=1), attempts=[an_attempt(1, status="transient")]),
         ["send -> DISPATCHING"]),
    "the last transient answer of the tool's budget fails the call":
        (dict(call=a_call(S.DISPATCHING, attempts=4),
              attempts=[an_attempt(n, status="transient") for n in range(1, 5)]),
         ["FAILED by ToolResultRecorded (call_attempt_budget_exhausted)",
          "stop run (call_attempt_budget_exhausted)", "saga"]),
    "a stale or unknown answer is UNKNOWN":
        (dict(call=a_call(S.DISPATCHING, attempts=1), attempts=[an_attempt(1, status="stale")]),
         ["extend work", "UNKNOWN by ToolOutcomeMarkedUnknown"]),
    "a dispatched call whose tool was dropped goes to a person":
        (dict(call=a_call(S.DISPATCHING, attempts=1), attempts=[an_attempt(1)],
              unregistered=True),
         ["MANUAL_REVIEW by ManualReviewRequired (unknown_tool)"]),
    "a settled call sleeps":
        (dict(call=a_call(S.SUCCEEDED, attempts=1), attempts=[applied()]), ["sleep"]),
}


@pytest.mark.parametrize("given, expected", TABLE.values(), ids=TABLE.keys())
def test_forward_decisions(given, expected):
    given = dict(given)
    call = given.pop("call")
    actions = decided(call, given.pop("attempts", ()), **given)
    assert summary(actions) == expected
    state = call.state
    for move in (action for action in actions if isinstance(action, Move | StartAttempt)):
        assert CALL_TRANSITIONS.permits(state, move.to), f"{state} -> {move.to}"
        state = move.to


@pytest.mark.parametrize("tool", [DEBIT, OVER_HTTP], ids=["kafka", "http"])
def test_the_intent_is_recorded_before_any_attempt(tool):
    """Invariant 1. A Kafka tool's first send follows its intent in the same step (its request
    is an outbox row of that transaction); an HTTP tool's waits for the next, once the intent
    has committed."""
    actions = decided(a_call(S.AUTHORIZED), tool=tool)
    kinds = [type(action) for action in actions if isinstance(action, Move | StartAttempt)]
    assert kinds == ([Move, StartAttempt] if tool.adapter == "kafka" else [Move])
    assert actions[0].to == S.INTENT_RECORDED


class CountingKeys(dict):
    """The capability keys, counting each lookup: one signature checked, one lookup."""

    looked_up = 0

    def get(self, kid, default=None):
        self.looked_up += 1
        return super().get(kid, default)


def test_the_step_that_records_an_intent_and_sends_it_checks_its_capability_once():
    keys = CountingKeys(KEYS)
    actions = decided(a_call(S.AUTHORIZED), keys=keys)
    assert summary(actions) == ["INTENT_RECORDED by DispatchIntentRecorded", "send -> DISPATCHING"]
    assert keys.looked_up == 1


def test_a_capability_edited_after_signing_is_refused_before_the_intent_is_recorded():
    """The one check of that step still stands between a forged capability and the send."""
    call = a_call(S.AUTHORIZED)
    forged = replace(call, capability={**call.capability, "arguments_hash": "b" * 64})
    actions = decided(forged)
    assert summary(actions) == ["DENIED by DispatchRefused (capability_signature_invalid)",
                                "stop run (capability_signature_invalid)", "saga"]
    assert not any(isinstance(action, StartAttempt) for action in actions)


def test_reconciliation_waits_for_every_earlier_attempts_deadline():
    """A later attempt with an earlier deadline must not let a lookup overtake the first."""
    first = an_attempt(1, status="transient")
    second = replace(an_attempt(2), deadline_at=NOW + timedelta(seconds=2))
    first = replace(first, deadline_at=NOW + timedelta(seconds=40))
    unknown = next(action for action in decided(a_call(S.DISPATCHING, attempts=2),
                                                [first, second], now=NOW + timedelta(seconds=3))
                   if isinstance(action, Move))
    assert unknown.to == S.UNKNOWN
    assert unknown.next_action_at == first.deadline_at + timedelta(
        seconds=SETTINGS.clock_skew_grace_s)


def test_an_unanswered_attempt_counts_against_its_dependency():
    breakers = Breakers(1, timedelta(seconds=60))
    decided(a_call(S.DISPATCHING, attempts=1), [an_attempt(1)], breakers=breakers)
    assert breakers.is_open("kafka:" + DEBIT.topic, LATER)


def test_a_call_in_line_is_looked_at_again_within_the_recheck_interval_or_as_it_expires():
    far = a_call(S.INTENT_RECORDED, deadline_at=LATER + timedelta(hours=1))
    [wait] = decided(far, capacity=slots(in_use=2))
    assert wait == WaitForCapacity(LATER + timedelta(seconds=CAPACITY_RECHECK_S))
    near = a_call(S.INTENT_RECORDED, deadline_at=LATER + timedelta(seconds=40))
    [wait] = decided(near, capacity=slots(in_use=2))
    assert wait.until < LATER + timedelta(seconds=40 - SETTINGS.recovery_reserve_s
                                          - SETTINGS.min_attempt_s + 1)
    # No slot came by then: it expires, unsent, instead of waiting past its deadline.
    assert summary(decided(near, now=wait.until, capacity=slots(in_use=2)))[0] == (
        "EXPIRED by DispatchRefused (run_deadline_passed)")
