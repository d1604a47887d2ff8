"""Phase compensate: what a call's ending means for its run's saga (docs/design.md §5.8).

A compensation call's ending settles its original; any other call's success may be a done
step of an aborted run, to be undone in turn; its failure stops the run. Which done step is
compensated next is ``next_to_compensate``; requesting it (a new call proposed to the policy)
is the executor's (``services/dispatcher/saga.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from services.dispatcher.decide.actions import Action, AdvanceSaga, SettleOriginal, StopRun
from services.dispatcher.repository import Call, Run
from shared.contracts.dispatch import CallState as S, DispatchReason
from shared.tools import ToolSpec

STOPS_WITHOUT_UNDOING = frozenset({DispatchReason.RUN_ATTEMPT_BUDGET_EXHAUSTED,
                                   DispatchReason.RUN_DEADLINE_PASSED})
"""Why a run may stop without its done steps being compensated: it ran out of attempts or time,
and what it did is what it was asked to do."""


def after_success(call: Call, run: Run) -> list[Action]:
    """``run`` as the step read it: locked for the step, so nothing stops it meanwhile, and a
    success stops nothing. In a run still going, no saga has anything to do (and its position
    is not read)."""
    if call.compensates is not None:
        return [SettleOriginal(S.COMPENSATED, None), AdvanceSaga()]
    if run.aborted_at is not None and run.compensates:
        return [AdvanceSaga()]  # in an aborted run, this effect is compensated too
    return []


def after_failure(call: Call, reason: DispatchReason, detail: str) -> list[Action]:
    """The run stops dispatching; a failure undoes its done steps, a run out of budget or
    time keeps them (nothing applied is undone unless someone asks for it)."""
    if call.compensates is not None:
        return [SettleOriginal(S.COMPENSATION_FAILED, reason), AdvanceSaga()]
    return [StopRun(reason, detail, compensate=reason not in STOPS_WITHOUT_UNDOING),
            AdvanceSaga()]


def next_to_compensate(in_flight: bool, done: Iterable[Call],
                       tool_of: Callable[[Call], ToolSpec | None]
                       ) -> Iterable[tuple[Call, ToolSpec]]:
    """The done steps to try, latest first, while no compensation is in flight: one at a
    time, so the saga undoes in the reverse order it did. Steps whose tool declares no
    compensation are skipped."""
    if in_flight:
        return
    for original in done:
        tool = tool_of(original)
        if tool is not None and tool.compensating_tool is not None:
            yield original, tool
