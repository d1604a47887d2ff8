"""The dispatcher's decisions (docs/design.md §4), apart from their execution.

``decide`` reads one call as it stands — its run, its attempts, a pending operator resolution,
the time — and returns the actions of its next step; the executor (``steps.py``) applies them in
the step's transaction. No SQL and no sending here, so every transition can be tested as a
table. One module per phase: ``forward`` (intent, attempts, their answers), ``reconcile``
(evidence for an UNKNOWN outcome), ``settle`` (endings), ``compensate`` (the saga),
``repair`` (operator resolutions), ``cancel`` (an operator's cancellation of the run).

The rules that make a lost response safe:
- an attempt is recorded before it is sent (the Kafka request is an outbox row of the same
  transaction); the intent before any attempt;
- no answer by the attempt deadline, or a response lost with its worker, is UNKNOWN, and
  UNKNOWN leaves only through evidence: a lookup by key, a replay under the same key where the
  tool deduplicates (inside its key-retention window), or a person;
- a lookup is sent only after every earlier attempt's deadline, so an older request still in
  flight cannot land after "not found" (downstreams also refuse expired requests and, where they
  check fences, anything older than the lookup's fence).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from services.dispatcher.capacity import Capacity
from services.dispatcher.decide import cancel, forward, reconcile, repair as repairs, settle
from services.dispatcher.decide.actions import Action, Postpone
from services.dispatcher.decide.situation import Judges, Repair, Situation
from services.dispatcher.repository import Attempt, Call, Run
from shared.contracts.dispatch import CallState as S
from shared.tools import ToolSpec

__all__ = ["Judges", "Repair", "decide"]


def decide(call: Call, run: Run, attempts: Sequence[Attempt], repair: Repair | None,
           now: datetime, *, fence: int, tool: ToolSpec | None, judges: Judges,
           capacity: Capacity | None = None) -> list[Action]:
    """The next step of ``call``, taken under a lease with ``fence``; ``tool``: the registry's
    entry for the call's tool (None: no longer declared); ``capacity``: the slots of the
    bounded tools as the step's batch sees them (None: no tool is bounded)."""
    step = Situation(call, run, tuple(attempts), now, fence, tool, judges,
                     capacity or Capacity({}))
    actions: list[Action] = []
    if run.cancellation is not None:
        actions, step = cancel.cancel(step)
    if repair is not None:
        resolved, settled = repairs.resolve(step, repair)
        if settled:
            return actions + resolved
        actions += resolved
    return actions + _by_state(step)


def _by_state(step: Situation) -> list[Action]:
    state = step.call.state
    if step.tool is None:
        return settle.unregistered_tool(step)
    if state == S.AUTHORIZED:
        return forward.record_intent(step)
    if state == S.INTENT_RECORDED:
        return forward.send(step, to=S.DISPATCHING)
    if state == S.DISPATCHING:
        return forward.after_attempt(step)
    if state == S.UNKNOWN:
        return reconcile.reconcile(step)
    if state == S.RECONCILING:
        return reconcile.after_reconciliation(step)
    return [Postpone(None)]  # settled, or waiting for its compensation
