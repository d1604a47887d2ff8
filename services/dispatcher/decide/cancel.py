"""Phase cancel: an operator's cancellation of the run, applied by the next step of any of its
calls (the dispatcher's consumer wakes one when the cancellation arrives).

Cancelling is stopping the run as a failure stops it (``StopRun``: its calls not yet sent are
refused, and only with ``compensate`` are its done steps undone), with its own reason, so every
call it refuses says ``run_cancelled``. A call already sent is not touched: it settles with its
true outcome. The step goes on to decide its own call against the stopped run, so a call not
yet sent is refused in the same step.
"""

from __future__ import annotations

from dataclasses import replace

from services.dispatcher import metrics
from services.dispatcher.decide.actions import (Action, AdvanceSaga, ConcludeCancellation, Count,
                                                StopRun)
from services.dispatcher.decide.situation import Situation
from services.dispatcher.repository import stopped_because
from shared.contracts.dispatch import DispatchReason

RUN_ALREADY_STOPPED = "run_already_stopped"


def cancel(step: Situation) -> tuple[list[Action], Situation]:
    """The actions that apply the run's pending cancellation, and the situation the call's own
    decision then sees."""
    run, cancellation = step.run, step.run.cancellation
    if run.aborted_at is not None:
        return [ConcludeCancellation(cancellation.event_id, "refused",
                                     f"{RUN_ALREADY_STOPPED}: {run.abort_reason}")], step
    detail = cancelled_by(cancellation.operator_id, cancellation.reason)
    stopped = replace(run, aborted_at=step.now, abort_code=DispatchReason.RUN_CANCELLED,
                      abort_reason=stopped_because(DispatchReason.RUN_CANCELLED, detail),
                      compensates=cancellation.compensate, cancellation=None)
    actions: list[Action] = [
        StopRun(DispatchReason.RUN_CANCELLED, detail, compensate=cancellation.compensate),
        ConcludeCancellation(cancellation.event_id, "applied", None),
        Count(metrics.RUN_CANCELLED, step.call.tool_name)]
    if cancellation.compensate:
        actions.append(AdvanceSaga())
    return actions, replace(step, run=stopped)


def cancelled_by(operator_id: str, reason: str) -> str:
    return f"cancelled by {operator_id}: {reason}"
