"""A call's moves within one step, written to its row as one compare-and-swap.

A step often moves its call more than once: an authorization's step records the intent, records
attempt 1 and moves to DISPATCHING. Each move is checked against the legality gate and given
its version (and so its event) when it is taken; the row is written once, when the step next
needs the database or ends: ``version = v + n ... WHERE version = v``, so a lost race (another
worker moved the call) still fails the whole step, as one stale move did before. An attempt
started by one of the moves is inserted by the same statement, with the call's attempt
counters and the run's budget: one round trip where there were five.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

import asyncpg

from services.dispatcher.repository import SCHEMA, Call
from services.dispatcher.states import CALL_TRANSITIONS
from shared.contracts.dispatch import CallState

COLUMNS = ("next_action_at", "reason", "result", "receipt_id", "succeeded_at")
"""What a move may set besides the state, the version and the fence."""


class IllegalTransition(Exception):
    """A bug or a lost race: the call is not where the step believed it was."""


@dataclass(frozen=True)
class NewAttempt:
    number: int
    kind: str
    worker_id: str
    deadline_at: datetime


@dataclass
class Moves:
    """The moves of one call not yet written: its row still holds ``written``."""

    written: Call
    call: Call = field(init=False)
    """The call as its moves have left it."""
    columns: dict[str, Any] = field(default_factory=dict)
    attempt: NewAttempt | None = None

    def __post_init__(self) -> None:
        self.call = self.written

    @property
    def pending(self) -> bool:
        return self.call is not self.written

    def move(self, to: CallState, *, next_action_at: datetime | None, **columns: Any) -> Call:
        """Take a move (``columns``: of ``COLUMNS``); returns the call as it leaves it."""
        if not CALL_TRANSITIONS.permits(self.call.state, to):
            raise IllegalTransition(f"{self.call.logical_call_id}: {self.call.state} -> {to} is "
                                    "not allowed")
        self.columns.update(columns, next_action_at=next_action_at)
        self.call = self.call.with_version(to, self.call.version + 1)
        return self.call

    def start(self, attempt: NewAttempt) -> None:
        """Record ``attempt`` with the next write, under the write's fence (the move that says
        so must follow)."""
        if self.attempt is not None:
            raise IllegalTransition(f"{self.call.logical_call_id}: two attempts in one write")
        self.attempt = attempt
        self.call = replace(self.call, attempts=self.call.attempts + 1,
                            lookups=self.call.lookups + (attempt.kind == "lookup"))

    async def write(self, conn: asyncpg.Connection, fence: int) -> Call:
        """Write the moves taken (nothing if none); returns the call as written. Raises
        ``IllegalTransition`` if the row is no longer at ``written``'s version, or a later
        fence has moved it."""
        if not self.pending:
            return self.call
        before, call = self.written, self.call
        names = [name for name in COLUMNS if name in self.columns]
        values = [json.dumps(self.columns[name]) if name == "result"
                  and self.columns[name] is not None else self.columns[name] for name in names]
        assignments = "".join(f", {name} = ${index}" for index, name in enumerate(names, start=8))
        moved = (f"UPDATE {SCHEMA}.calls SET state = $3, version = version + $5, fence = $2,"
                 " capacity = NULL, updated_at = now(), attempts = attempts + $6,"
                 f" lookups = lookups + $7{assignments}"
                 " WHERE logical_call_id = $1 AND version = $4 AND fence <= $2"
                 " RETURNING logical_call_id")
        arguments: list[Any] = [call.logical_call_id, fence, call.state, before.version,
                                call.version - before.version, call.attempts - before.attempts,
                                call.lookups - before.lookups, *values]
        if (attempt := self.attempt) is None:
            statement = moved
        else:
            first = len(arguments) + 1
            # The run's budget counts what it asks of the world; lookups (recovery) and
            # compensations must never be starved by it.
            budget = attempt.kind == "send" and call.compensates is None
            arguments += [attempt.number, attempt.kind, attempt.worker_id, attempt.deadline_at,
                          call.tenant_id, call.run_id, budget]
            statement = (
                f"WITH moved AS ({moved}),"
                f" attempt AS (INSERT INTO {SCHEMA}.attempts (logical_call_id, attempt, kind,"
                "   fence, worker_id, deadline_at)"
                f"  SELECT logical_call_id, ${first}, ${first + 1}, $2, ${first + 2},"
                f"   ${first + 3} FROM moved),"
                f" budget AS (UPDATE {SCHEMA}.runs SET attempts_used = attempts_used + 1"
                f"  WHERE tenant_id = ${first + 4} AND run_id = ${first + 5} AND ${first + 6}"
                "   AND EXISTS (SELECT FROM moved))"
                " SELECT logical_call_id FROM moved")
        if await conn.fetchval(statement, *arguments) is None:
            raise IllegalTransition(f"{call.logical_call_id}: version {before.version} or fence "
                                    f"{fence} is stale")
        self.written, self.columns, self.attempt = call, {}, None
        return call


async def transition(conn: asyncpg.Connection, call: Call, to: CallState, *, fence: int,
                     next_action_at: datetime | None, **columns: Any) -> int:
    """One move of ``call`` (read under lock), written at once; returns its new version."""
    moves = Moves(call)
    moves.move(to, next_action_at=next_action_at, **columns)
    return (await moves.write(conn, fence)).version
