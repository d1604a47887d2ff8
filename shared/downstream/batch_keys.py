"""The downstream SDK's fences and operation keys for a whole batch of requests at once.

``fences.admit`` and ``idempotent_write`` cost a statement or two per request. A consumer
that answers a batch in one transaction locks and reads every fence and key the batch names
in two statements (``BatchKeys.load``), decides the requests in delivery order in memory,
each seeing what the ones before it left (a raised fence, a settled or released key), and
writes the changes with its own in one final statement (``write``). The same answers as the
statement-by-statement helpers; the locks are the same rows, taken in key order.

A key claimed by a transaction that commits while the batch waits on it is in neither
answer of the claiming statement (its snapshot predates the commit): ``RaceLost``, a
retryable error, rolls the batch back to be delivered again, when the key reads as settled.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import asyncpg

from shared.db.identifiers import checked_identifier
from shared.db.plans import hidden, hidden_columns
from shared.downstream.fences import scope
from shared.downstream.idempotent_write import Claim
from shared.errors import RetryableError
from shared.runs import RunKey


class RaceLost(RetryableError):
    """A key this batch claims was settled by a transaction that committed meanwhile."""


@dataclass
class _Key:
    request_hash: str | None
    """Whose claim holds the key; None while it is free (claimed by the batch, unused)."""
    response: dict[str, Any] | None = None
    ours: bool = False
    """Inserted by this batch: written back settled, or deleted if it ends unsettled."""


class BatchKeys:
    def __init__(self, schema: str, fences: dict[str, int], keys: dict[str, _Key]) -> None:
        self._schema = checked_identifier(schema)
        self._fences, self._loaded = fences, dict(fences)
        self._keys = keys

    @classmethod
    async def load(cls, conn: asyncpg.Connection, schema: str, fences: list[tuple[RunKey, int]],
                   claims: dict[str, str], lookups: list[str]) -> BatchKeys:
        """``fences``: every (run, fence) the batch names, in delivery order; ``claims``: the
        request hash of each key a request may claim. Fences are locked first, as a request
        admits before it claims. Both statements are planned once per connection, like
        ``write``."""
        first: dict[str, int] = {}
        for run, fence in fences:
            first.setdefault(scope(run), fence)
        table = f'"{checked_identifier(schema)}"'
        scopes = sorted(first)
        rows = await conn.fetch(  # a new scope starts at the first fence: admitted, as by admit
            f"INSERT INTO {table}.fences AS f (scope, fence) SELECT * FROM unnest("
            f"{hidden_columns(1, 'text[]', 'int8[]')}) ORDER BY 1"
            " ON CONFLICT (scope) DO UPDATE SET fence = f.fence "
            "RETURNING scope, fence", scopes, [first[s] for s in scopes])
        locked = {row["scope"]: row["fence"] for row in rows}
        keys = sorted(claims)
        found: dict[str, _Key] = {}
        for row in await conn.fetch(
                f"WITH claimed AS (INSERT INTO {table}.idempotency_keys (operation_key, request_hash)"
                f"  SELECT * FROM unnest({hidden_columns(1, 'text[]', 'text[]')})"
                "  ORDER BY 1"
                "  ON CONFLICT (operation_key) DO NOTHING RETURNING operation_key)"
                " SELECT operation_key, NULL::text AS request_hash, NULL::jsonb AS response,"
                "  true AS ours FROM claimed"
                " UNION ALL SELECT operation_key, request_hash, response, false"
                f"  FROM {table}.idempotency_keys"
                f"  WHERE operation_key = ANY({hidden('$3', 'text[]')})",
                keys, [claims[key] for key in keys], keys + lookups):
            response = json.loads(row["response"]) if row["response"] is not None else None
            found[row["operation_key"]] = (_Key(None, None, True) if row["ours"]
                                           else _Key(row["request_hash"], response))
        if missing := set(claims) - set(found):
            raise RaceLost(f"keys settled meanwhile by another transaction: {sorted(missing)}")
        return cls(schema, locked, found)

    def admit(self, run: RunKey, fence: int) -> bool:
        """``fences.admit``: raise the run's fence unless ``fence`` is lower (False: stale)."""
        current = max(self._fences[scope(run)], fence)
        self._fences[scope(run)] = current
        return current == fence

    def claim(self, operation_key: str, request_hash: str) -> Claim:
        key = self._keys[operation_key]
        if key.request_hash is None:
            key.request_hash = request_hash
            return Claim("new")
        if key.request_hash != request_hash:
            return Claim("reused")
        if key.response is None:
            raise RuntimeError(f"key {operation_key!r} was claimed without a recorded response")
        return Claim("replay", key.response)

    def release(self, operation_key: str) -> None:
        self._keys[operation_key].request_hash = None

    def record(self, operation_key: str, response: dict[str, Any]) -> None:
        self._keys[operation_key].response = response

    def recorded(self, operation_key: str) -> dict[str, Any] | None:
        key = self._keys.get(operation_key)
        return key.response if key is not None else None

    async def write(self, conn: asyncpg.Connection, ctes: str, arguments: list,
                    counted: dict[str, int]) -> None:
        """The batch's one write statement: the caller's ``ctes`` (parameters from ``$1``)
        and the fences' and keys'. Raises unless the keys, and each CTE in ``counted``, touch
        as many rows as expected: the rows are locked, so a difference is a bug. Its arrays
        are hidden from the planner (``shared.db.plans``), the caller's too, so it is planned
        once per connection: planned afresh, it cost the wallet more than running it."""
        n = len(arguments) + 1
        raised = {s: f for s, f in self._fences.items() if f != self._loaded[s]}
        settled = {k: key for k, key in self._keys.items() if key.ours and key.response is not None}
        released = [k for k, key in self._keys.items() if key.ours and k not in settled]
        table = f'"{self._schema}"'
        counts = "".join(f", (SELECT count(*) FROM {name})" for name in counted)
        row = await conn.fetchrow(
            f"WITH {ctes},"
            f" fences_raised AS (UPDATE {table}.fences t SET fence = v.fence"
            f"  FROM unnest({hidden_columns(n, 'text[]', 'int8[]')})"
            "  AS v(scope, fence) WHERE t.scope = v.scope),"
            f" keys_settled AS (UPDATE {table}.idempotency_keys t SET request_hash = v.h,"
            f"  response = v.r FROM unnest({hidden_columns(n + 2, 'text[]', 'text[]', 'jsonb[]')})"
            "  AS v(key, h, r) WHERE t.operation_key = v.key AND t.response IS NULL RETURNING 1),"
            f" keys_released AS (DELETE FROM {table}.idempotency_keys t"
            f"  WHERE t.operation_key = ANY({hidden(f'${n + 5}', 'text[]')})"
            "  AND t.response IS NULL RETURNING 1)"
            " SELECT (SELECT count(*) FROM keys_settled) + (SELECT count(*) FROM keys_released)"
            f"{counts}",
            *arguments, list(raised), list(raised.values()), list(settled),
            [key.request_hash for key in settled.values()],
            [json.dumps(key.response) for key in settled.values()], released)
        if list(row) != [len(settled) + len(released), *counted.values()]:
            raise RuntimeError(f"the batch's rows changed under their locks: {list(row)}")


ATTEMPT = (("operation_key", "text"), ("logical_call_id", "uuid"), ("attempt", "int4"),
           ("fence", "int8"))
"""The columns every effect row records of the request that applied it, with their types."""


def inserted(name: str, table: str, typed_columns: tuple[tuple[str, str], ...],
             first_parameter: int) -> str:
    """A CTE ``name`` inserting into ``table`` the rows given as column arrays (``columns``)
    from ``$first_parameter`` on."""
    names = ", ".join(column for column, _ in typed_columns)
    arrays = hidden_columns(first_parameter, *(f"{kind}[]" for _, kind in typed_columns))
    return f"{name} AS (INSERT INTO {table} ({names}) SELECT * FROM unnest({arrays}))"


def columns(rows: list[tuple], width: int) -> list[list]:
    """Tuples as the column arrays ``unnest`` takes."""
    return [[row[n] for row in rows] for n in range(width)]
