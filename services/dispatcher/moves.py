"""A call's moves within one step, and a batch's moves written as one compare-and-swap.

A step often moves its call more than once: an authorization's step records the intent, records
attempt 1 and moves to DISPATCHING. Each move is checked against the legality gate and given
its version (and so its event) when it is taken; the row is written once, when the step next
needs the database, or with the other steps of its batch when they have all been taken
(``batch.py``): one statement for the whole batch, ``version = v + n ... WHERE version = v``
per call, so a lost race (another worker moved a call) still fails, as one stale move did
before. The attempts the moves started are inserted by the same statement, with the calls'
attempt counters and their runs' budgets.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

import asyncpg

from services.dispatcher.repository import SCHEMA, Call
from services.dispatcher.states import CALL_TRANSITIONS
from shared.contracts.dispatch import CallState
from shared.db.plans import hidden

COLUMNS = ("next_action_at", "reason", "result", "receipt_id", "succeeded_at")
"""What a move may set besides the state, the version and the fence."""

_KEPT_UNLESS_SET = ", ".join(
    f"{name} = CASE WHEN v.sets & {1 << bit} <> 0 THEN v.{name} ELSE c.{name} END"
    for bit, name in enumerate(COLUMNS))
_ARRAYS = ("uuid[]", "bigint[]", "text[]", "bigint[]", "bigint[]", "int[]", "int[]", "int[]",
           "timestamptz[]", "text[]", "jsonb[]", "text[]", "timestamptz[]", "int[]", "text[]",
           "text[]", "timestamptz[]", "bool[]")
"""The types of ``_WRITE``'s parameters, a column of the batch's rows each, in order."""
_WRITE = (
    "WITH v AS (SELECT * FROM unnest("
    f"{', '.join(hidden(f'${n}', sql_type) for n, sql_type in enumerate(_ARRAYS, 1))})"
    "  AS v(id, fence, state, version, moved_by, attempts, lookups, sets, next_action_at,"
    "   reason, result, receipt_id, succeeded_at, attempt, kind, worker_id, deadline_at,"
    "   budget)),"
    f" moved AS (UPDATE {SCHEMA}.calls c SET state = v.state, version = c.version + v.moved_by,"
    "   fence = v.fence, capacity = NULL, updated_at = now(), attempts = c.attempts + v.attempts,"
    f"   lookups = c.lookups + v.lookups, {_KEPT_UNLESS_SET}"
    "  FROM v WHERE c.logical_call_id = v.id AND c.version = v.version AND c.fence <= v.fence"
    "  RETURNING c.logical_call_id, c.tenant_id, c.run_id),"
    f" attempt AS (INSERT INTO {SCHEMA}.attempts (logical_call_id, attempt, kind, fence,"
    "   worker_id, deadline_at)"
    "  SELECT v.id, v.attempt, v.kind, v.fence, v.worker_id, v.deadline_at FROM v"
    "  WHERE v.attempt IS NOT NULL AND v.id IN (SELECT logical_call_id FROM moved)),"
    f" budget AS (UPDATE {SCHEMA}.runs r SET attempts_used = r.attempts_used + b.sends"
    "  FROM (SELECT m.tenant_id, m.run_id, count(*) AS sends FROM moved m JOIN v"
    "   ON v.id = m.logical_call_id WHERE v.budget GROUP BY m.tenant_id, m.run_id) b"
    "  WHERE r.tenant_id = b.tenant_id AND r.run_id = b.run_id)"
    " SELECT logical_call_id FROM moved")
"""The moves of a batch's calls, a row each: what each sets of ``COLUMNS`` is a bit of
``sets`` (a column a call's moves did not set keeps its value), and the attempt its moves
started, if any, with whether it spends its run's budget. The rows are hidden from the
planner: the statement is planned once per connection (``shared.db.plans``)."""


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
    """The moves of one call not yet written, under ``fence``: its row still holds
    ``written``."""

    written: Call
    fence: int
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

    async def write(self, conn: asyncpg.Connection) -> Call:
        """Write the moves taken (nothing if none); returns the call as written."""
        await write(conn, [self])
        return self.call

    def _row(self) -> tuple[Any, ...]:
        before, call, attempt = self.written, self.call, self.attempt
        sets = sum(1 << bit for bit, name in enumerate(COLUMNS) if name in self.columns)
        result = self.columns.get("result")
        # The run's budget counts what it asks of the world; lookups (recovery) and
        # compensations must never be starved by it.
        budget = attempt is not None and attempt.kind == "send" and call.compensates is None
        return (call.logical_call_id, self.fence, call.state, before.version,
                call.version - before.version, call.attempts - before.attempts,
                call.lookups - before.lookups, sets, self.columns.get("next_action_at"),
                self.columns.get("reason"), None if result is None else json.dumps(result),
                self.columns.get("receipt_id"), self.columns.get("succeeded_at"),
                *((attempt.number, attempt.kind, attempt.worker_id, attempt.deadline_at)
                  if attempt is not None else (None,) * 4), budget)

    def _written(self) -> None:
        self.written, self.columns, self.attempt = self.call, {}, None


async def write(conn: asyncpg.Connection, batch: Sequence[Moves]) -> None:
    """Write the moves taken of every call of ``batch`` (at most one ``Moves`` a call) in one
    statement; nothing for those with none. Raises ``IllegalTransition`` if a call's row is no
    longer at its ``written`` version, or a later fence has moved it: the others are written
    then, so the caller's transaction must roll back (a stepping transaction does: its batch
    is stepped again, each call alone)."""
    pending = [moves for moves in batch if moves.pending]
    if not pending:
        return
    if len({moves.call.logical_call_id for moves in pending}) < len(pending):
        # One row would be updated once, with one of its rows of moves: the rest lost.
        raise ValueError("two sets of moves of one call in one write")
    columns = list(zip(*(moves._row() for moves in pending), strict=True))
    moved = {row["logical_call_id"] for row in await conn.fetch(_WRITE, *columns)}
    if stale := [moves.call.logical_call_id for moves in pending
                 if moves.call.logical_call_id not in moved]:
        raise IllegalTransition(f"{', '.join(map(str, stale))}: version or fence is stale")
    for moves in pending:
        moves._written()


async def transition(conn: asyncpg.Connection, call: Call, to: CallState, *, fence: int,
                     next_action_at: datetime | None, **columns: Any) -> int:
    """One move of ``call`` (read under lock), written at once; returns its new version."""
    moves = Moves(call, fence)
    moves.move(to, next_action_at=next_action_at, **columns)
    return (await moves.write(conn)).version
