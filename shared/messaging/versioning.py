"""Compare-and-swap on a monotonic aggregate version, behind a state-machine legality gate.

An event carries the version its writer produced. It applies only onto version - 1, and only
if the state machine permits the transition; otherwise it is reported, never forced:

- STALE: the aggregate is already at or beyond that version (a duplicate or a replay);
- ILLEGAL: a gap (an earlier event is missing) or a forbidden transition (out of order).

CAS compares the version, never the state: a self-loop (A → A) would match a stale row.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import Enum

import asyncpg

from shared.db.identifiers import checked_identifier

INITIAL = None
"""The 'from' state of an aggregate's first event."""


class Advance(Enum):
    APPLIED = "applied"
    STALE = "stale"
    ILLEGAL = "illegal"


class Transitions:
    def __init__(self, allowed: Mapping[str | None, Iterable[str]]) -> None:
        self._allowed = {source: frozenset(targets) for source, targets in allowed.items()}

    def permits(self, source: str | None, target: str) -> bool:
        return target in self._allowed.get(source, frozenset())

    def predecessors(self, target: str) -> list[str]:
        return [s for s, targets in self._allowed.items() if s is not None and target in targets]


@dataclass(frozen=True)
class VersionedTable:
    """A table with columns ``<key_column> text PRIMARY KEY, state text, version bigint``."""

    schema: str
    table: str
    key_column: str = "id"

    def __post_init__(self) -> None:
        for name in (self.schema, self.table, self.key_column):
            checked_identifier(name)

    @property
    def qualified(self) -> str:
        return f'"{self.schema}"."{self.table}"'


async def advance(conn: asyncpg.Connection, table: VersionedTable, key: str, *,
                  to_state: str, version: int, transitions: Transitions) -> Advance:
    """Move ``key`` to ``to_state`` as ``version``; must run inside the caller's transaction."""
    k = table.key_column
    if version == 1:
        if not transitions.permits(INITIAL, to_state):
            return Advance.ILLEGAL
        inserted = await conn.fetchval(
            f"INSERT INTO {table.qualified} ({k}, state, version) VALUES ($1, $2, 1) "
            f"ON CONFLICT ({k}) DO NOTHING RETURNING version", key, to_state)
        return Advance.APPLIED if inserted else Advance.STALE
    swapped = await conn.fetchval(
        f"UPDATE {table.qualified} SET state = $2, version = $3 "
        f"WHERE {k} = $1 AND version = $3 - 1 AND state = ANY($4::text[]) RETURNING version",
        key, to_state, version, transitions.predecessors(to_state))
    if swapped:
        return Advance.APPLIED
    current = await conn.fetchval(f"SELECT version FROM {table.qualified} WHERE {k} = $1", key)
    return Advance.STALE if current is not None and current >= version else Advance.ILLEGAL
