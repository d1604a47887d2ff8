"""An operator's cancellation of a run as a table: whatever state the stepped call is in, the
run stops with ``run_cancelled``; a call not yet sent is refused, a call already sent is left
to settle with its true outcome, and done steps are undone only if the operator asked."""

from __future__ import annotations

import uuid
from dataclasses import replace

import pytest

from services.dispatcher.decide.actions import Move, StartAttempt
from services.dispatcher.repository import Cancellation
from services.dispatcher.states import CALL_TRANSITIONS
from shared.contracts.dispatch import CallState as S, DispatchReason
from tests.unit.dispatcher.situations import (a_call, a_repair, an_attempt, applied, decided,
                                              summary)
from tests.unit.dispatcher.test_dispatch_rules import NOW, RUN

KEEP = Cancellation(uuid.uuid4(), "operator:dana", "the customer withdrew", compensate=False)
UNDO = replace(KEEP, compensate=True)
CANCELLING = replace(RUN, cancellation=KEEP)
STOP = "stop run (run_cancelled) keeping done steps"

TABLE = {
    "an authorized call is refused in the step that cancels its run":
        (dict(call=a_call(S.AUTHORIZED)),
         [STOP, "cancellation applied", "DENIED by DispatchRefused (run_cancelled)"]),
    "a recorded intent is refused, never sent":
        (dict(call=a_call(S.INTENT_RECORDED)),
         [STOP, "cancellation applied", "DENIED by DispatchRefused (run_cancelled)"]),
    "a call in flight keeps waiting for its answer":
        (dict(call=a_call(S.DISPATCHING, attempts=1), attempts=[an_attempt(1)], now=NOW),
         [STOP, "cancellation applied", "wait"]),
    "a call in flight whose answer came settles with it":
        (dict(call=a_call(S.DISPATCHING, attempts=1), attempts=[applied()]),
         [STOP, "cancellation applied", "SUCCEEDED by ToolResultRecorded", "effect of #1"]),
    "with compensate, a call in flight whose answer came is undone too":
        (dict(call=a_call(S.DISPATCHING, attempts=1), attempts=[applied()],
              run=replace(RUN, cancellation=UNDO)),
         ["stop run (run_cancelled)", "cancellation applied", "saga",
          "SUCCEEDED by ToolResultRecorded", "effect of #1", "saga"]),
    "a call whose outcome is unknown is still reconciled":
        (dict(call=a_call(S.DISPATCHING, attempts=1), attempts=[an_attempt(1)]),
         [STOP, "cancellation applied", "#1 unknown", "extend work",
          "UNKNOWN by ToolOutcomeMarkedUnknown"]),
    "a call confirmed not applied is not retried: it fails as cancelled":
        (dict(call=a_call(S.DISPATCHING, attempts=1), attempts=[an_attempt(1, status="transient")]),
         [STOP, "cancellation applied", "FAILED by ToolResultRecorded (run_cancelled)",
          "stop run (run_cancelled)", "saga"]),
    "a settled call only stops its run":
        (dict(call=a_call(S.SUCCEEDED, attempts=1), attempts=[applied()]),
         [STOP, "cancellation applied", "sleep"]),
    "with compensate, the run's done steps are undone":
        (dict(call=a_call(S.SUCCEEDED, attempts=1), attempts=[applied()],
              run=replace(RUN, cancellation=UNDO)),
         ["stop run (run_cancelled)", "cancellation applied", "saga", "sleep"]),
    "a run that stopped already is not stopped again; the cancellation is refused":
        (dict(call=a_call(S.SUCCEEDED, attempts=1), attempts=[applied()],
              run=replace(CANCELLING, aborted_at=NOW, abort_code="rejected_by_tool",
                          abort_reason="rejected_by_tool: insufficient funds")),
         ["cancellation refused (run_already_stopped: rejected_by_tool: insufficient funds)",
          "sleep"]),
}


@pytest.mark.parametrize("given, expected", TABLE.values(), ids=TABLE.keys())
def test_cancel_decisions(given, expected):
    given = dict(given)
    call = given.pop("call")
    actions = decided(call, given.pop("attempts", ()), **({"run": CANCELLING} | given))
    assert summary(actions) == expected
    for move in (action for action in actions if isinstance(action, Move | StartAttempt)):
        assert CALL_TRANSITIONS.permits(call.state, move.to)


def test_no_call_of_a_cancelled_run_is_ever_sent():
    """Once cancelled, whichever call is stepped next and however it stands, nothing starts."""
    cancelled = replace(RUN, aborted_at=NOW, abort_code=DispatchReason.RUN_CANCELLED,
                        abort_reason="run_cancelled: cancelled by operator:dana: withdrawn")
    for call, attempts in [(a_call(S.AUTHORIZED), ()), (a_call(S.INTENT_RECORDED), ()),
                           (a_call(S.DISPATCHING, attempts=1),
                            [an_attempt(1, status="transient")]),
                           (a_call(S.DISPATCHING, attempts=1),
                            [an_attempt(1, status="rejected",
                                        receipt={"reason": "deadline_passed"})])]:
        actions = decided(call, attempts, run=cancelled)
        assert not any(isinstance(action, StartAttempt) for action in actions), summary(actions)
        refused = [action for action in actions if isinstance(action, Move)]
        assert [move.reason for move in refused] == [DispatchReason.RUN_CANCELLED]


def test_a_resolution_settling_the_call_in_the_same_step_does_not_drop_the_cancellation():
    """Both wait for the same step of a call in MANUAL_REVIEW: the run stops and the operator's
    evidence settles the call; the cancellation is concluded, not left pending for ever."""
    actions = decided(a_call(S.MANUAL_REVIEW, attempts=1), [an_attempt(1, status="unknown")],
                      run=CANCELLING, repair=a_repair("failed"))
    lines = summary(actions)
    assert lines[:2] == [STOP, "cancellation applied"], lines
    assert "FAILED by ToolOutcomeResolved (resolved_by_operator)" in lines
    assert "repair applied" in lines
