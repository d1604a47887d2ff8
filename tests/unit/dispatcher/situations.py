"""Builders for the decision tables: a call in a given state, its attempts, and ``decide`` run
with a valid capability, a policy that allows, and a fresh breaker, unless a row says otherwise.
Each decision is summarized as short strings, so a table row reads as what the step does."""

from __future__ import annotations

import uuid
from dataclasses import replace
from datetime import timedelta

from services.dispatcher.breaker import Breakers
from services.dispatcher.capacity import Capacity
from services.dispatcher.decide import Judges, Repair, decide
from services.dispatcher.decide.actions import (AdvanceSaga, CommitEffect, ConcludeCancellation,
                                                ConcludeRepair, Count, CrashPoint, ExtendWork,
                                                FinishAttempt, Move, Postpone, SettleOriginal,
                                                StartAttempt, StopRun, WaitForCapacity)
from services.dispatcher.repository import Attempt, Call
from services.dispatcher.settings import DispatcherSettings
from shared.contracts.dispatch import CallState as S
from tests.unit.dispatcher.test_dispatch_rules import (KEYS, NOW, REGISTRY, RUN, StaticPolicy,
                                                       call_of, capability_for, debit_intent)

SETTINGS = DispatcherSettings()
LATER = NOW + timedelta(seconds=30)
"""When a table's step is taken: past the deadline of an attempt started at NOW."""


class ResolvingPolicy(StaticPolicy):
    """Lets operator ``ops-1`` settle anything, nobody else."""

    def resolution_rule(self, operator_id, intent, outcome):
        return "ops-may-settle" if operator_id == "ops-1" else None


def a_call(state: S, *, tool: str = "wallet.debit", attempts: int = 0, lookups: int = 0,
           compensates: uuid.UUID | None = None, capability: bool = True,
           **intent_changes) -> Call:
    intent = debit_intent(tool_name=tool, compensates=compensates, **intent_changes)
    call = call_of(intent, capability=capability_for(intent) if capability else None,
                   compensates=compensates)
    return replace(call, state=state, attempts=attempts, lookups=lookups, result=None,
                   receipt_id=None, succeeded_at=None)


def an_attempt(number: int, *, kind: str = "send", status: str | None = None,
               receipt: dict | None = None, started_at=NOW, fence: int = 1,
               finished: bool = True) -> Attempt:
    return Attempt(number, kind, fence, "w-1", started_at, started_at + timedelta(seconds=5),
                   status, f"receipt: {status}" if status else None, receipt,
                   started_at + timedelta(seconds=1) if status and finished else None)


def applied(number: int = 1, **receipt) -> Attempt:
    return an_attempt(number, status="applied", receipt={
        "receipt_id": "r-1", "result": {"debit_id": "d-1", "balance_minor": 6000}, **receipt})


def a_repair(outcome: str = "succeeded", operator: str = "ops-1") -> Repair:
    request = {"logical_call_id": str(uuid.uuid4()), "run_id": "run-1", "outcome": outcome,
               "operator_id": operator, "reason": "checked the ledger", "evidence": "stmt 42",
               "decided_at": NOW.isoformat()}
    if outcome == "succeeded":
        request |= {"receipt_id": "r-9", "result": {"debit_id": "d-9", "balance_minor": 1}}
    return Repair(uuid.uuid4(), request)


def decided(call: Call, attempts=(), *, now=LATER, run=RUN, repair=None, fence: int = 1,
            tool=None, breakers: Breakers | None = None, unregistered: bool = False,
            capacity: Capacity | None = None, keys=KEYS):
    spec = None if unregistered else tool or REGISTRY.resolve(call.tool_name, call.tool_version)
    judges = Judges(SETTINGS, ResolvingPolicy("v1"), keys,
                    breakers or Breakers(SETTINGS.breaker_failures,
                                         timedelta(seconds=SETTINGS.breaker_cooldown_s)))
    return decide(call, run, list(attempts), repair, now, fence=fence, tool=spec, judges=judges,
                  capacity=capacity)


def summary(actions) -> list[str]:
    """What a decision does, one string an action; counts are left out but for those that
    make a metric of their own."""
    lines = []
    for action in actions:
        match action:
            case Move(to, event, reason=reason):
                lines.append(f"{to} by {event}" + (f" ({reason})" if reason else ""))
            case StartAttempt(kind, _, to):
                lines.append(f"{kind} -> {to}")
            case Postpone(until):
                lines.append("wait" if until else "sleep")
            case WaitForCapacity():
                lines.append("in line")
            case FinishAttempt(attempt, status, _):
                lines.append(f"#{attempt} {status}")
            case ExtendWork():
                lines.append("extend work")
            case CommitEffect(producer):
                lines.append(f"effect of #{producer.attempt}")
            case ConcludeRepair(_, status):
                lines.append(f"repair {status}")
            case ConcludeCancellation(_, status, detail):
                lines.append(f"cancellation {status}" + (f" ({detail})" if detail else ""))
            case StopRun(reason, _, compensate):
                lines.append(f"stop run ({reason})" + ("" if compensate else " keeping done steps"))
            case SettleOriginal(to):
                lines.append(f"original {to}")
            case AdvanceSaga():
                lines.append("saga")
            case CrashPoint(name):
                lines.append(f"then {name}")
            case Count():
                pass
    return lines
