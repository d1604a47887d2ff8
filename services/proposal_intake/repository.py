"""The intake's SQL: runs and intents (the idempotency records) in schema proposal_intake."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime

import asyncpg

from shared.contracts.intake import Intent
from shared.db.plans import hidden, run_keys
from shared.runs import RunKey

SCHEMA = "proposal_intake"


@dataclass(frozen=True)
class RunLimits:
    deadline_at: datetime
    max_calls: int
    max_attempts: int
    cost_limit_minor: int | None
    currency: str | None


async def run_for_update(conn: asyncpg.Connection, run: RunKey) -> asyncpg.Record | None:
    """Lock the run so its calls are taken one at a time (budgets count correctly)."""
    rows = await runs_for_update(conn, [run])
    return rows[0] if rows else None


async def runs_for_update(conn: asyncpg.Connection, runs: list[RunKey]) -> list[asyncpg.Record]:
    """Lock the runs that exist, in (tenant, run id) order: two takers lock any runs they
    share in the same order, so neither waits on the other in a cycle."""
    return await conn.fetch(f"SELECT r.* FROM {_runs_locked('$1', '$2')}", *_run_arrays(runs))


def _runs_locked(tenants: str, run_ids: str) -> str:
    """SQL, the ``FROM`` of a select of ``r``: the runs named by the text-array parameters
    ``tenants`` and ``run_ids`` (``_run_arrays``), locked in run order, each by its key as the
    sorted keys are walked, the keys hidden from the planner: the statements that read them
    are planned once per connection (``shared.db.plans``)."""
    return (f"{run_keys(tenants, run_ids)}"
            f" CROSS JOIN LATERAL (SELECT * FROM {SCHEMA}.runs WHERE tenant_id = k.tenant_id"
            "  AND run_id = k.run_id FOR UPDATE) AS r ORDER BY r.tenant_id, r.run_id")


def _run_arrays(runs: list[RunKey]) -> tuple[list[str], list[str]]:
    ordered = sorted(set(runs))
    return [key.tenant_id for key in ordered], [key.run_id for key in ordered]


async def create_run(conn: asyncpg.Connection, proposal, limits: RunLimits,
                     person_id: str | None) -> asyncpg.Record:
    """Called only on the way to an accepted call; a concurrent first call may win the insert,
    in which case its row is returned (locked) and checked like any existing run."""
    await create_runs(conn, [new_run(proposal, limits, person_id)])
    return await run_for_update(conn, RunKey.of(proposal))


def new_run(proposal, limits: RunLimits, person_id: str | None) -> dict:
    """The row a run starts with, as ``runs_for_update`` would read it back: the proposal's
    principal's, and ``person_id``'s, the person a gateway proposed its first call for."""
    return {"run_id": proposal.run_id, "tenant_id": proposal.tenant_id,
            "principal_id": proposal.principal_id, "deadline_at": limits.deadline_at,
            "max_calls": limits.max_calls, "max_attempts": limits.max_attempts,
            "cost_limit_minor": limits.cost_limit_minor, "currency": limits.currency,
            "call_count": 0, "cost_spent_minor": 0, "person_id": person_id,
            "person_recorded": True}


_RUN_COLUMNS = ("run_id", "tenant_id", "principal_id", "deadline_at", "max_calls", "max_attempts",
                "cost_limit_minor", "currency", "call_count", "cost_spent_minor", "person_id",
                "person_recorded")
_RUN_TYPES = ("text", "text", "text", "timestamptz", "int4", "int4", "int8", "text", "int4", "int8",
              "text", "bool")


async def create_runs(conn: asyncpg.Connection, runs: list[dict]) -> int:
    """Insert the runs no one created meanwhile; how many were inserted."""
    return len(await conn.fetch(_runs_inserted(1), *_run_values(runs)))


def _runs_inserted(first: int) -> str:
    arrays = ", ".join(f"${n}::{kind}[]" for n, kind in enumerate(_RUN_TYPES, first))
    return (f"INSERT INTO {SCHEMA}.runs ({', '.join(_RUN_COLUMNS)}) SELECT * FROM unnest({arrays}) "
            "ON CONFLICT (tenant_id, run_id) DO NOTHING RETURNING 1")


def _run_values(runs: list[dict]) -> list[list]:
    return [[run[column] for run in runs] for column in _RUN_COLUMNS]


async def record_batch(conn: asyncpg.Connection, runs: list[dict], intents: list[Intent],
                       added: dict[RunKey, tuple[int, int]], also: tuple[str, list]) -> tuple[int, int]:
    """A batch's writes in one statement: the new ``runs`` (with their counters as the batch
    left them), the ``intents``, what the batch ``added`` to existing runs' counters, and the
    caller's ``also`` (a CTE and its arguments, from ``$1``). Returns how many runs and
    intents were new: fewer than given when another transaction took them first."""
    cte, arguments = also
    runs_from = len(arguments) + 1
    intents_from = runs_from + len(_RUN_COLUMNS)
    counted_from = intents_from + len(_INTENT_COLUMNS)
    row = await conn.fetchrow(
        f"WITH {cte}, r AS ({_runs_inserted(runs_from)}), i AS ({_intents_inserted(intents_from)}),"
        f" c AS ({_calls_counted(counted_from)})"
        " SELECT (SELECT count(*) FROM r) AS runs, (SELECT count(*) FROM i) AS intents",
        *arguments, *_run_values(runs), *_intent_values(intents), *_count_values(added))
    return row["runs"], row["intents"]


async def call_by_operation_key(conn: asyncpg.Connection, key: str) -> dict | None:
    _, rows = await runs_and_calls_named(conn, [], [key], [])
    return rows[0] if rows else None


NAMED = ("logical_call_id", "arguments_hash", "state", "run_id", "operation_key", "tenant_id",
         "provider_call_id", "principal_id", "person_id", "person_recorded", "expired_at")
"""The columns of an intent ``runs_and_calls_named`` finds, in their order."""


async def runs_and_calls_named(conn: asyncpg.Connection, runs: list[RunKey], keys: list[str],
                               call_ids: list[tuple[RunKey, str]]
                               ) -> tuple[list[dict], list[dict]]:
    """What a batch decides its calls against, in one round trip: ``runs`` locked as
    ``runs_for_update`` locks them, first (the arrays are computed in the order they are
    selected); then the intents that hold any of these operation keys or (run, provider call
    id) pairs, and the tombstones of expired keys among them (``expired_at`` set;
    ``expiry.py``), read in one snapshot: an expiry commits the tombstone with the delete, so a
    key is always found in one form or the other. Each is a dict of its columns (a run's are
    ``_RUN_COLUMNS``, as ``new_run`` makes one).

    The snapshot is the statement's, taken before the runs' locks are waited for: a run comes
    back as locked (its latest version), but an intent that the transaction holding the lock
    committed meanwhile is not seen. The batch's insert then comes back short and the batch is
    retried (``batch.RaceLost``); the rate buckets, locked a statement earlier, already
    serialize one tenant's intake transactions, so that is the safety net it was."""
    keys_param = hidden("$3", "text[]")
    row = await conn.fetchrow(
        f"SELECT ARRAY(SELECT ROW({', '.join(f'r.{name}' for name in _RUN_COLUMNS)})"
        f"  FROM {_runs_locked('$1', '$2')}) AS runs,"
        f" ARRAY(SELECT ROW({', '.join(NAMED)}) FROM ("
        "  SELECT logical_call_id, arguments_hash, state, run_id, operation_key, tenant_id,"
        "   provider_call_id, principal_id, person_id, person_recorded,"
        "   NULL::timestamptz AS expired_at"
        f"   FROM {SCHEMA}.logical_calls WHERE operation_key = ANY({keys_param})"
        "  UNION SELECT c.logical_call_id, c.arguments_hash, c.state, c.run_id, c.operation_key,"
        "   c.tenant_id, c.provider_call_id, c.principal_id, c.person_id, c.person_recorded, NULL"
        f"   FROM unnest({hidden('$4', 'text[]')}, {hidden('$5', 'text[]')},"
        f"    {hidden('$6', 'text[]')}) AS k(tenant_id, run_id, provider_call_id)"
        f"   CROSS JOIN LATERAL (SELECT * FROM {SCHEMA}.logical_calls WHERE tenant_id = k.tenant_id"
        "    AND run_id = k.run_id AND provider_call_id = k.provider_call_id) AS c"
        "  UNION SELECT logical_call_id, NULL, NULL, run_id, operation_key, tenant_id, NULL,"
        f"   principal_id, person_id, person_recorded, expired_at FROM {SCHEMA}.expired_keys"
        f"   WHERE operation_key = ANY({keys_param})"
        " ) AS named) AS calls",
        *_run_arrays(runs), keys, [run.tenant_id for run, _ in call_ids],
        [run.run_id for run, _ in call_ids], [call_id for _, call_id in call_ids])
    return ([dict(zip(_RUN_COLUMNS, fields, strict=True)) for fields in row["runs"]],
            [dict(zip(NAMED, fields, strict=True)) for fields in row["calls"]])


async def insert_intent(conn: asyncpg.Connection, intent: Intent, cost_minor: int) -> bool:
    """False when the operation key or (tenant, run, provider call id) is already taken."""
    if not await insert_intents(conn, [intent]):
        return False
    await count_calls(conn, {RunKey(intent.tenant_id, intent.run_id): (1, cost_minor)})
    return True


_INTENT_COLUMNS = ("logical_call_id", "operation_key", "run_id", "provider", "provider_call_id",
                   "tool_name", "tool_version", "arguments_hash", "canonical_arguments",
                   "principal_id", "tenant_id", "person_id")
_INTENT_TYPES = {"logical_call_id": "uuid", "canonical_arguments": "jsonb"}


async def insert_intents(conn: asyncpg.Connection, intents: list[Intent]) -> int:
    """How many were new: fewer than given when a key or a (tenant, run, provider call id) was
    taken."""
    return len(await conn.fetch(_intents_inserted(1), *_intent_values(intents)))


def _intents_inserted(first: int) -> str:
    """In operation key order (``_intent_values``): two takers wait on shared keys in one order.
    An expired key is never taken again, whatever the caller read before."""
    arrays = ", ".join(f"${n}::{_INTENT_TYPES.get(column, 'text')}[]"
                       for n, column in enumerate(_INTENT_COLUMNS, first))
    columns = ", ".join(_INTENT_COLUMNS)
    return (f"INSERT INTO {SCHEMA}.logical_calls ({columns}, person_recorded, state, version) "
            f"SELECT {columns}, true, 'VALIDATED', 1 FROM unnest({arrays}) WITH ORDINALITY AS u({columns}, n)"
            f" WHERE NOT EXISTS (SELECT 1 FROM {SCHEMA}.expired_keys e"
            " WHERE e.operation_key = u.operation_key)"
            " ORDER BY n ON CONFLICT DO NOTHING RETURNING 1")


def _intent_values(intents: list[Intent]) -> list[list]:
    ordered = sorted(intents, key=lambda intent: intent.operation_key)
    values = [[getattr(intent, column) for intent in ordered] for column in _INTENT_COLUMNS]
    values[_INTENT_COLUMNS.index("canonical_arguments")] = [
        json.dumps(intent.canonical_arguments) for intent in ordered]
    return values


async def count_calls(conn: asyncpg.Connection, added: dict[RunKey, tuple[int, int]]) -> None:
    """Add (calls, cost in minor units) to each run's counters."""
    await conn.execute(_calls_counted(1), *_count_values(added))


def _calls_counted(first: int) -> str:
    return (f"UPDATE {SCHEMA}.runs r SET call_count = r.call_count + a.calls, "
            "cost_spent_minor = r.cost_spent_minor + a.cost "
            f"FROM unnest(${first}::text[], ${first + 1}::text[], ${first + 2}::int4[], "
            f"${first + 3}::int8[]) AS a(tenant_id, run_id, calls, cost)"
            " WHERE r.tenant_id = a.tenant_id AND r.run_id = a.run_id")


def _count_values(added: dict[RunKey, tuple[int, int]]) -> list[list]:
    return [[key.tenant_id for key in added], [key.run_id for key in added],
            [calls for calls, _ in added.values()], [cost for _, cost in added.values()]]
