"""One step of one call's life (docs/design.md §4), taken under the run's lease in one transaction.

Kafka consumers only record facts (an authorization arrived, a receipt answered attempt n);
every decision — record the intent, send, retry, call an outcome UNKNOWN, reconcile, settle,
compensate — is taken by ``decide`` (``services/dispatcher/decide/``, no I/O) for the worker
holding the run's lease, and applied here, with the fence stamped on the transition and on
every request. A step returns what must happen after its commit: a crash point, or an HTTP call
(which must never run inside a transaction: the attempt is recorded first, the outcome in a
second transaction that re-checks the fence).
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from services.dispatcher import (attempts, cancellations, events, leases, repository as repo,
                                 resolutions)
from services.dispatcher.adapters import kafka
from services.dispatcher.adapters.orders import Order
from services.dispatcher.authority import PolicyView
from services.dispatcher.breaker import Breakers
from services.dispatcher.capacity import Capacity
from services.dispatcher.compensations import Proposer
from services.dispatcher.decide import Judges, Repair, decide
from services.dispatcher.decide.actions import (AdvanceSaga, AfterCommit, CommitEffect,
                                                ConcludeCancellation, ConcludeRepair, Count,
                                                CrashPoint, ExtendWork, FinishAttempt, Move,
                                                Postpone, SettleOriginal, StartAttempt, StopRun,
                                                WaitForCapacity)
from services.dispatcher.decide.situation import dependency_of
from services.dispatcher.moves import COLUMNS, Moves, NewAttempt, transition
from services.dispatcher.repository import Attempt, Call, Run
from services.dispatcher.saga import Saga
from services.dispatcher.settings import DispatcherSettings
from shared.capabilities import PublicKeys
from shared.contracts.dispatch import TOOL_ATTEMPT_STARTED
from shared.db.unit_of_work import UnitOfWork
from shared.tools import Rejection, ToolRegistry, ToolSpec

__all__ = ["HttpWork", "Known", "StepReport", "Stepper", "dependency_of"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class HttpWork:
    """An HTTP attempt recorded in the step's transaction, to perform after its commit."""

    order: Order
    lease: leases.Lease
    traceparent: str | None


@dataclass(frozen=True)
class Known:
    """What a step reads before deciding, fetched for a whole batch of calls at once."""

    run: Run
    attempts: list[Attempt]
    resolution: tuple[uuid.UUID, dict[str, Any]] | None
    capacity: Capacity
    """The batch's, shared by its steps: a send counts against the next step's view."""


@dataclass(frozen=True)
class StepReport:
    after: list[AfterCommit | HttpWork]
    observed: list[tuple[str, str]]
    moves: Moves | None = None
    """The call's last moves, not yet written: its batch writes them with the other calls'
    (``moves.write``), before its transaction commits."""


WRITE_BEHIND = (Move, StartAttempt, Count, CrashPoint, CommitEffect)
"""The actions that need nothing of the database (``Move`` and ``StartAttempt`` add to the
call's unwritten moves, the others to the transaction's outbox or to after its commit). Before
any other action the call's moves are written; those left at the step's end are written with
the rest of its batch's (``batch.py``, ``moves.py``)."""


@dataclass
class Step:
    """One step being applied: its call's moves, and what to do after commit."""

    uow: UnitOfWork
    moves: Moves
    lease: leases.Lease
    now: datetime
    after: list[AfterCommit | HttpWork]
    observed: list[tuple[str, str]]
    """(metric, tool) to count once the step's transaction has committed."""

    @property
    def conn(self):
        return self.uow.connection

    @property
    def call(self) -> Call:
        """The call as the step has moved it."""
        return self.moves.call

    async def move(self, call: Call, to, **fields) -> int:
        """A compare-and-swap transition of another ``call`` under this step's fence, now."""
        return await transition(self.conn, call, to, fence=self.lease.fence, **fields)

    async def write(self) -> None:
        await self.moves.write(self.conn)


class Stepper:
    def __init__(self, registry: ToolRegistry, policy: PolicyView, breakers: Breakers,
                 settings: DispatcherSettings, keys: PublicKeys, proposer: Proposer | None) -> None:
        """``proposer``: how this dispatcher proposes compensations (None: it cannot)."""
        self._registry = registry
        self._settings = settings
        self._judges = Judges(settings, policy, keys, breakers)
        self._events = events.Recorder(settings.dispatch_topic, settings.effects_topic,
                                       settings.results_family)
        self._saga = Saga(registry, policy, proposer, settings, self._events, self.tool_of)

    def tool_of(self, call: Call | attempts.ReceiptCall) -> ToolSpec | None:
        try:
            return self._registry.resolve(call.tool_name, call.tool_version)
        except Rejection:
            return None

    async def step(self, uow: UnitOfWork, call: Call, lease: leases.Lease, now: datetime,
                   known: Known) -> StepReport:
        """``known``: the call's run, attempts and pending resolution, read (and locked) in this
        transaction for the whole batch it belongs to."""
        tool = self.tool_of(call)
        repair = Repair(*known.resolution) if known.resolution is not None else None
        actions = decide(call, known.run, known.attempts, repair, now, fence=lease.fence,
                         tool=tool, judges=self._judges, capacity=known.capacity)
        step = Step(uow, Moves(call, lease.fence), lease, now, [], [])
        for action in actions:
            if not isinstance(action, WRITE_BEHIND):
                await step.write()
            await self._apply(step, action, tool, known.capacity)
        return StepReport(step.after, step.observed, step.moves)

    async def _apply(self, step: Step, action, tool: ToolSpec | None,
                     capacity: Capacity) -> None:
        call, conn = step.call, step.conn
        match action:
            case Postpone(until):
                await repo.postpone(conn, call, until)
            case WaitForCapacity(until):
                capacity.waits(call.tool_name, call.capacity)
                await repo.wait_for_capacity(conn, call, until)
            case Move():
                await self._move(step, action)
            case StartAttempt():
                capacity.sent(call.tool_name, call.capacity)
                await self._start_attempt(step, action, tool)
            case FinishAttempt(attempt, status, detail):
                await attempts.finish_attempt(
                    conn, attempts.Answer(call.logical_call_id, attempt, status, detail, None))
            case ExtendWork(until):
                await repo.extend_work(conn, call.run, until)
            case CommitEffect(producer, result, receipt_id):
                self._events.committed_effect(step.uow, call, producer, result, receipt_id)
            case ConcludeRepair(event_id, status, detail, operator_id):
                if status == "refused":
                    log.warning("resolution of %s by %s refused: %s", call.logical_call_id,
                                operator_id, detail)
                await resolutions.conclude(conn, event_id, status, detail)
            case ConcludeCancellation(event_id, status, detail):
                log.log(logging.WARNING if status == "refused" else logging.INFO,
                        "cancellation of run %s %s%s", call.run, status,
                        f": {detail}" if detail else "")
                await cancellations.conclude(conn, event_id, status, detail)
            case Count(metric, tool_name):
                step.observed.append((metric, tool_name))
            case CrashPoint(name):
                step.after.append(name)
            case StopRun():
                await self._saga.stop(step, action)
            case SettleOriginal(to, reason):
                await self._saga.settle_original(step, to, reason)
            case AdvanceSaga():
                await self._saga.advance(step)
            case _:
                raise TypeError(f"no executor for {action!r}")

    async def _move(self, step: Step, move: Move) -> None:
        columns = {name: getattr(move, name) for name in COLUMNS
                   if name != "next_action_at" and getattr(move, name) is not None}
        call = step.moves.move(move.to, next_action_at=move.next_action_at, **columns)
        event = {name: getattr(move, name)
                 for name in ("reason", "detail", "result", "receipt_id", "operator_id", "evidence")
                 if getattr(move, name) is not None}
        self._events.call_event(step.uow, move.event, call, step.lease, state=move.to,
                                version=call.version, attempt=move.attempt, **event)

    async def _start_attempt(self, step: Step, start: StartAttempt, tool: ToolSpec) -> None:
        call, lease, deadline = step.call, step.lease, start.deadline
        number = call.attempts + 1
        step.moves.start(NewAttempt(number, start.kind, lease.owner_id, deadline))
        attempt = Attempt(number, start.kind, lease.fence, lease.owner_id, step.now, deadline,
                          None, None, None, None)
        await self._move(step, Move(start.to, TOOL_ATTEMPT_STARTED, next_action_at=deadline,
                                    attempt=attempt, detail=f"until {deadline.isoformat()}"))
        order = Order(kind=start.kind, tool=tool, run_id=call.run_id, tenant_id=call.tenant_id,
                      logical_call_id=call.logical_call_id, operation_key=call.operation_key,
                      canonical_arguments=call.canonical_arguments, attempt=number,
                      fence=lease.fence, deadline_at=deadline,
                      capability=call.capability if start.kind == "send" else None)
        if tool.adapter == "http":
            await leases.cover(step.conn, lease, deadline)
            step.after.append(HttpWork(order, lease, call.traceparent))
        else:
            kafka.request(step.uow, order, self._settings.reply_topic)
            step.after.append("sent")
