"""A bound on each tool's attempts in flight (the registry's ``max_in_flight``).

Why: an attempt's deadline starts when it is sent. When a downstream consumes its requests more
slowly than authorizations arrive, unbounded sends queue in its topic and outlive their
deadlines there: each becomes UNKNOWN, costs a lookup and a second send, and adds load to the
very dependency that is behind — retries that feed the overload. With a bound, the backlog waits
in the dispatcher instead, before its attempt starts, and leaves in order as answers come back.

How, in the dispatcher's tables, so that every replica and every restart sees one count:

- a tool's slots in use are its attempts (sends and lookups) unanswered and within their
  deadline (past it, a request can no longer be applied: downstreams refuse it), plus the calls
  ``admitted`` to a slot they have not used yet; read once per batch of steps (``SLOTS``) and
  counted on as the batch sends;
- a send that finds no free slot, or finds others in line before it, leaves its call
  ``waiting`` (``decide/forward.py``); only sends wait: a lookup is recovery, and is never
  queued behind new work;
- a batch that touched a tool with calls in line admits as many of them as there are free
  slots, earliest first, and makes them due (``admit``): a slot freed by an answer is handed on
  in the transaction that recorded the answer;
- a waiting call is looked at again at the latest after ``CAPACITY_RECHECK_S`` (or in time to
  expire at its deadline), so a call is never stranded by a race between two transactions; a
  call that waits past its run's deadline expires, as it would have in the downstream's queue,
  but without having been sent.

The bound is soft across concurrent transactions: two that read the same free slots may each
fill them. Only new sends can do that (a consumer's batch of authorizations, a scheduler's
batch); an admitted call's slot is counted from its admission on, whoever steps it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

import asyncpg

from services.dispatcher.repository import NOTIFY_CHANNEL, SCHEMA
from shared.db.plans import hidden

CAPACITY_RECHECK_S = 60.0
"""The longest a waiting call sleeps without being admitted (a safety net: admission wakes it)."""

_MARKED = f"(SELECT count(*) FROM {SCHEMA}.calls WHERE capacity = '{{}}' AND tool_name = t.tool_name)"
_IN_USE = (f"(SELECT count(*) FROM {SCHEMA}.attempts a JOIN {SCHEMA}.calls c USING (logical_call_id)"
          "  WHERE a.status IS NULL AND a.deadline_at > now() AND c.tool_name = t.tool_name)"
          f" + {_MARKED.format('admitted')}")
"""SQL: the slots in use of the tool ``t.tool_name`` (one definition for the batch's count,
the admission and the gauge)."""
_IN_LINE = _MARKED.format("waiting")
"""SQL: the calls in line for the tool ``t.tool_name``."""


@dataclass
class Capacity:
    """One batch's view of its bounded tools: slots in use and calls in line, as read when the
    batch began and as its own steps changed them."""

    bounds: dict[str, int]
    in_use: Counter[str] = field(default_factory=Counter)
    in_line: Counter[str] = field(default_factory=Counter)

    def admits(self, tool_name: str, place: str | None) -> bool:
        """Whether a send of ``tool_name`` by a call with ``place`` (its ``capacity``) may go.
        An admitted call has its slot; a waiting one goes if a slot is free; a new one only if,
        besides, nobody is in line before it."""
        bound = self.bounds.get(tool_name)
        if bound is None or place == "admitted":
            return True
        free = self.in_use[tool_name] < bound
        return free if place == "waiting" else free and not self.in_line[tool_name]

    def sent(self, tool_name: str, place: str | None) -> None:
        if tool_name in self.bounds and place != "admitted":  # an admitted call's slot is counted
            self.in_use[tool_name] += 1
        if place == "waiting":
            self.in_line[tool_name] -= 1

    def waits(self, tool_name: str, place: str | None) -> None:
        if place is None:
            self.in_line[tool_name] += 1

    def with_line(self) -> dict[str, int]:
        """The bounded tools with calls in line, and their bounds: what ``admit`` looks at."""
        return {tool: bound for tool, bound in self.bounds.items() if self.in_line[tool] > 0}


SLOTS = (f"ARRAY(SELECT ROW(t.tool_name, {_IN_USE}, {_IN_LINE})"
         f" FROM unnest({hidden('$2', 'text[]')}) AS t(tool_name))")
"""SQL, an array: the slots in use and the calls in line of each bounded tool ``$2``
(``reads.py``)."""


def capacity_from(bounds: dict[str, int], rows: list[tuple]) -> Capacity:
    """One batch's ``Capacity`` from ``SLOTS``'s rows, read for the tools of ``bounds``."""
    capacity = Capacity(bounds)
    for tool_name, in_use, in_line in rows:
        capacity.in_use[tool_name] = in_use
        capacity.in_line[tool_name] = in_line
    return capacity


async def admit(conn: asyncpg.Connection, bounds: dict[str, int]) -> int:
    """Admit, for each of these tools, as many waiting calls as it has free slots, earliest
    first, and make them due (one NOTIFY wakes the schedulers at commit); returns how many."""
    if not bounds:
        return 0
    return await conn.fetchval(
        f"WITH free AS ("
        f"   SELECT t.tool_name, t.bound - ({_IN_USE}) AS slots"
        "   FROM unnest($1::text[], $2::int[]) AS t(tool_name, bound)),"
        " chosen AS ("
        "   SELECT line.logical_call_id FROM free CROSS JOIN LATERAL ("
        f"    SELECT logical_call_id FROM {SCHEMA}.calls"
        "     WHERE capacity = 'waiting' AND tool_name = free.tool_name"
        "     ORDER BY next_action_at LIMIT greatest(free.slots, 0)"
        "     FOR UPDATE SKIP LOCKED) AS line),"
        " admitted AS ("
        f"   UPDATE {SCHEMA}.calls SET capacity = 'admitted', next_action_at = now()"
        "    WHERE logical_call_id IN (SELECT logical_call_id FROM chosen) RETURNING 1)"
        " SELECT count(*) FROM admitted"
        f" LEFT JOIN LATERAL (SELECT pg_notify('{NOTIFY_CHANNEL}', '')) AS woken ON true",
        list(bounds), list(bounds.values()))


async def in_line(conn: asyncpg.Connection, tools: list[str]) -> dict[str, int]:
    """Calls in line now for each of ``tools`` (0 included): the backlog gauge."""
    rows = await conn.fetch(f"SELECT t.tool_name, {_IN_LINE} AS calls"
                            " FROM unnest($1::text[]) AS t(tool_name)", tools)
    return {row["tool_name"]: row["calls"] for row in rows}


def bounds_of(max_in_flight: Iterable[tuple[str, int | None]]) -> dict[str, int]:
    """The bounded tools among (tool name, its ``max_in_flight``) pairs."""
    return {tool: bound for tool, bound in max_in_flight if bound is not None}
