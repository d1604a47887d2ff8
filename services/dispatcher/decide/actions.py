"""What a decision asks the executor to do, in order, inside the step's transaction.

Plain values, so a decision can be compared in a table test. Each action names one effect on
the call, its run or the outbox; ``Move`` is a transition together with the event that
records it, because the dispatcher never changes a call's state without saying so.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from services.dispatcher.repository import Attempt
from shared.contracts.dispatch import CallState, DispatchReason

AfterCommit = Literal["intent_recorded", "sent", "compensation_requested"]


@dataclass(frozen=True)
class Postpone:
    """Look at the call again at ``until`` (None: only when something wakes it)."""

    until: datetime | None


@dataclass(frozen=True)
class WaitForCapacity:
    """Wait in line for a slot of the tool's ``max_in_flight`` (``capacity.py``): admitted
    when one frees, looked at again at ``until`` at the latest."""

    until: datetime


@dataclass(frozen=True)
class Move:
    """A compare-and-swap transition of the call, and its event ``event``. ``attempt``: the one
    the event names. Only the columns given (not None) are written besides state and fence."""

    to: CallState
    event: str
    next_action_at: datetime | None = None
    attempt: Attempt | None = None
    reason: DispatchReason | None = None
    detail: str | None = None
    result: dict[str, Any] | None = None
    receipt_id: str | None = None
    succeeded_at: datetime | None = None
    operator_id: str | None = None
    evidence: str | None = None


@dataclass(frozen=True)
class StartAttempt:
    """Record attempt ``call.attempts + 1``, move to ``to`` saying so, then request it: an
    outbox row of the same transaction, or an HTTP call after the commit (the attempt is on
    record before anything can be sent)."""

    kind: Literal["send", "lookup"]
    deadline: datetime
    to: CallState


@dataclass(frozen=True)
class FinishAttempt:
    """What an unanswered attempt came to, once its answer can no longer come."""

    attempt: int
    status: str
    detail: str


@dataclass(frozen=True)
class ExtendWork:
    """The run keeps an owner until ``until`` (recovery may outlast its deadline)."""

    until: datetime


@dataclass(frozen=True)
class CommitEffect:
    """The audit record of one business effect, naming the attempt that produced it."""

    producer: Attempt
    result: dict[str, Any]
    receipt_id: str


@dataclass(frozen=True)
class ConcludeRepair:
    """An operator's resolution is applied or refused, for the record."""

    event_id: uuid.UUID
    status: Literal["applied", "refused"]
    detail: str | None
    operator_id: str


@dataclass(frozen=True)
class ConcludeCancellation:
    """An operator's cancellation of the run is applied or refused, for the record."""

    event_id: uuid.UUID
    status: Literal["applied", "refused"]
    detail: str | None


@dataclass(frozen=True)
class Count:
    """A metric, counted once the step's transaction has committed."""

    metric: str
    tool_name: str


@dataclass(frozen=True)
class StopRun:
    """A failure or refusal of a call of the run: the run stops dispatching, its unsent calls
    are refused, and its done steps are compensated unless ``compensate`` is False."""

    reason: DispatchReason
    detail: str
    compensate: bool


@dataclass(frozen=True)
class SettleOriginal:
    """This compensation call settled: its original is COMPENSATED or COMPENSATION_FAILED."""

    to: CallState
    reason: DispatchReason | None


@dataclass(frozen=True)
class AdvanceSaga:
    """In an aborted run that compensates, request the next compensation (latest done step
    first), one at a time."""


@dataclass(frozen=True)
class CrashPoint:
    """A fault-injection point to pass once the transaction has committed."""

    name: AfterCommit


Action = (Postpone | WaitForCapacity | Move | StartAttempt | FinishAttempt | ExtendWork
          | CommitEffect | ConcludeRepair | ConcludeCancellation | Count | StopRun
          | SettleOriginal | AdvanceSaga | CrashPoint)
