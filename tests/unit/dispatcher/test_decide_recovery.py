"""Reconciliation, operator repair and the saga's decisions as a table: UNKNOWN leaves only
through evidence (a lookup's answer, a replay under the key the downstream still remembers, or a
person), and every ending says what it means for the run."""

from __future__ import annotations

import uuid
from dataclasses import replace
from datetime import timedelta

import pytest
from hypothesis import given, strategies as st

from services.dispatcher.capacity import Capacity
from services.dispatcher.decide.actions import Move, StartAttempt
from services.dispatcher.decide.compensate import next_to_compensate
from services.dispatcher.states import CALL_TRANSITIONS
from shared.contracts.dispatch import CallState as S
from tests.unit.dispatcher.situations import (LATER, SETTINGS, a_call, a_repair, an_attempt,
                                              applied, decided, summary)
from tests.unit.dispatcher.test_dispatch_rules import NOW, REGISTRY

RESERVE = "inventory.reserve"
RETAINED = REGISTRY.resolve(RESERVE, "1").retry.key_retention_seconds
ORIGINAL = uuid.uuid4()
SENT = an_attempt(1, status="unknown")
FULL = Capacity({"wallet.debit": 1})
FULL.in_use["wallet.debit"], FULL.in_line["wallet.debit"] = 1, 5
LOOKED = an_attempt(2, kind="lookup", started_at=NOW + timedelta(seconds=10))

TABLE = {
    "an unknown outcome is looked up by key":
        (dict(call=a_call(S.UNKNOWN, attempts=1), attempts=[SENT]), ["lookup -> RECONCILING"]),
    "a lookup is never put in line behind new sends, whatever the tool's slots":
        (dict(call=a_call(S.UNKNOWN, attempts=1), attempts=[SENT], capacity=FULL),
         ["lookup -> RECONCILING"]),
    "lookups back off":
        (dict(call=a_call(S.UNKNOWN, attempts=2, lookups=1),
              attempts=[SENT, replace(LOOKED, status="transient",
                                      finished_at=LATER - timedelta(seconds=0.5))]),
         ["wait"]),
    "unanswered lookups past the budget go to a person":
        (dict(call=a_call(S.UNKNOWN, attempts=1, lookups=SETTINGS.max_lookups),
              attempts=[SENT]),
         ["MANUAL_REVIEW by ManualReviewRequired (reconciliation_budget_exhausted)"]),
    "a tool with neither lookup nor safe replay goes to a person":
        (dict(call=a_call(S.UNKNOWN, tool="email.send", attempts=1), attempts=[SENT]),
         ["MANUAL_REVIEW by ManualReviewRequired (no_reconciliation_path)"]),
    "a deduplicating tool is replayed under the same key":
        (dict(call=a_call(S.UNKNOWN, tool=RESERVE, attempts=1), attempts=[SENT]),
         ["send -> RECONCILING"]),
    "no replay once the downstream may have forgotten the key":
        (dict(call=a_call(S.UNKNOWN, tool=RESERVE, attempts=1), attempts=[SENT],
              now=NOW + timedelta(seconds=RETAINED)),
         ["MANUAL_REVIEW by ManualReviewRequired (downstream_key_expired)"]),
    "no replay that authority no longer allows":
        (dict(call=a_call(S.UNKNOWN, tool=RESERVE, attempts=1), attempts=[SENT],
              now=NOW + timedelta(hours=2)),
         ["MANUAL_REVIEW by ManualReviewRequired (no_reconciliation_path)"]),
    "a lookup that finds the effect settles it as reconciled":
        (dict(call=a_call(S.RECONCILING, attempts=2), attempts=[SENT, applied(2)]),
         ["SUCCEEDED by ToolEffectReconciled", "effect of #2"]),
    "a lookup that finds a rejection fails the call":
        (dict(call=a_call(S.RECONCILING, attempts=2),
              attempts=[SENT, replace(LOOKED, status="rejected", receipt={"reason": "no"})]),
         ["FAILED by ToolEffectReconciled (rejected_by_tool)", "stop run (rejected_by_tool)",
          "saga"]),
    "not found: nothing was applied, so it is sent again":
        (dict(call=a_call(S.RECONCILING, attempts=2),
              attempts=[SENT, replace(LOOKED, status="not_found")]),
         ["send -> DISPATCHING"]),
    "not found, but the key may be forgotten: a person decides":
        (dict(call=a_call(S.RECONCILING, tool="shipment.schedule", attempts=2),
              attempts=[SENT, replace(LOOKED, status="not_found")],
              now=NOW + timedelta(days=7)),
         ["MANUAL_REVIEW by ManualReviewRequired (downstream_key_expired)"]),
    "not found with the run's attempts spent: failed on that evidence":
        (dict(call=a_call(S.RECONCILING, tool=RESERVE, attempts=6),
              attempts=[*(an_attempt(n, status="transient") for n in range(1, 6)),
                        replace(LOOKED, attempt=6, status="not_found")]),
         ["FAILED by ToolResultRecorded (call_attempt_budget_exhausted)",
          "stop run (call_attempt_budget_exhausted)", "saga"]),
    "an unanswered lookup is recorded and the next one backs off":
        (dict(call=a_call(S.RECONCILING, attempts=2, lookups=1),
              attempts=[SENT, replace(LOOKED, deadline_at=LATER - timedelta(seconds=1))]),
         ["#2 unknown", "wait"]),
    "a lookup without evidence is looked up again":
        (dict(call=a_call(S.RECONCILING, attempts=2, lookups=1),
              attempts=[SENT, replace(LOOKED, status="stale", finished_at=NOW)]),
         ["lookup -> RECONCILING"]),
    "an operator settles a call in review, with its effect":
        (dict(call=a_call(S.MANUAL_REVIEW, attempts=1), attempts=[SENT], repair=a_repair()),
         ["SUCCEEDED by ToolOutcomeResolved (resolved_by_operator)", "repair applied",
          "effect of #1"]),
    "an operator fails a call in review, which stops the run":
        (dict(call=a_call(S.MANUAL_REVIEW, attempts=1), attempts=[SENT],
              repair=a_repair("failed")),
         ["FAILED by ToolOutcomeResolved (resolved_by_operator)", "repair applied",
          "stop run (resolved_by_operator)", "saga"]),
    "a resolution of a call still in flight is refused, and the step goes on":
        (dict(call=a_call(S.DISPATCHING, attempts=1), attempts=[applied()],
              repair=a_repair()),
         ["repair refused", "SUCCEEDED by ToolResultRecorded", "effect of #1"]),
    "a resolution by someone no rule names is refused":
        (dict(call=a_call(S.MANUAL_REVIEW, attempts=1), attempts=[SENT],
              repair=a_repair(operator="agent-7")),
         ["repair refused", "sleep"]),
    "a compensation that applied settles its original":
        (dict(call=a_call(S.DISPATCHING, attempts=1, compensates=ORIGINAL), attempts=[applied()]),
         ["SUCCEEDED by ToolResultRecorded", "effect of #1", "original COMPENSATED", "saga"]),
    "a compensation that was rejected fails its original's compensation, not the run":
        (dict(call=a_call(S.DISPATCHING, attempts=1, compensates=ORIGINAL),
              attempts=[an_attempt(1, status="rejected", receipt={"reason": "no"})]),
         ["FAILED by ToolResultRecorded (rejected_by_tool)", "original COMPENSATION_FAILED",
          "saga"]),
}


@pytest.mark.parametrize("given_", TABLE.values(), ids=TABLE.keys())
def test_recovery_decisions(given_):
    situation, expected = given_
    situation = dict(situation)
    call = situation.pop("call")
    actions = decided(call, situation.pop("attempts", ()), **situation)
    assert summary(actions) == expected
    for move in (action for action in actions if isinstance(action, Move | StartAttempt)):
        assert CALL_TRANSITIONS.permits(call.state, move.to)


STATUSES = st.sampled_from([None, "applied", "rejected", "not_found", "transient", "unknown",
                            "stale", "refused"])


@given(tool=st.sampled_from(["wallet.debit", RESERVE, "email.send", "shipment.schedule"]),
       statuses=st.lists(STATUSES, min_size=1, max_size=6),
       seconds=st.integers(min_value=0, max_value=7200))
def test_unknown_leaves_only_through_evidence(tool, statuses, seconds):
    """From UNKNOWN a step only looks, replays or asks a person; from RECONCILING it settles
    only on the latest attempt's own evidence."""
    attempts = [an_attempt(n, kind="send" if n == 1 else "lookup", status=status)
                for n, status in enumerate(statuses, start=1)]
    now = NOW + timedelta(seconds=seconds)
    for state in (S.UNKNOWN, S.RECONCILING):
        call = a_call(state, tool=tool, attempts=len(attempts))
        for action in decided(call, attempts, now=now):
            if isinstance(action, Move | StartAttempt):
                assert CALL_TRANSITIONS.permits(state, action.to)
            if isinstance(action, Move) and action.to == S.SUCCEEDED:
                assert statuses[-1] == "applied"
            if isinstance(action, Move) and action.to == S.FAILED:
                assert state == S.RECONCILING and statuses[-1] in ("rejected", "not_found")


def test_done_steps_are_compensated_latest_first_and_one_at_a_time():
    debit, email = a_call(S.SUCCEEDED), a_call(S.SUCCEEDED, tool="email.send")
    reserve = a_call(S.SUCCEEDED, tool=RESERVE)
    tool_of = lambda call: REGISTRY.resolve(call.tool_name, call.tool_version)  # noqa: E731
    chosen = [call for call, _ in next_to_compensate(False, [reserve, email, debit], tool_of)]
    assert chosen == [reserve, debit]  # email.send declares no compensation
    assert list(next_to_compensate(True, [reserve, debit], tool_of)) == []
