"""The downstream SDK helper: an idempotent write keyed by the caller's operation key.

Use it inside the transaction that performs the domain write::

    claim = await claim_key(conn, schema, key, request_hash(request))
    if claim.status == "new":
        response = ...domain write...
        await record_response(conn, schema, key, response)

A request refused for a reason of its own (too late, not understood, the system declined)
leaves the key unsettled with ``release_key``: the refusal says nothing about the intent, so a
later request under the key is new and a lookup meanwhile finds nothing.

The key row and the domain write MUST commit in the same transaction. Saved apart, a crash
between the two leaves either an applied effect with no key (the caller's retry under the
same key applies it again: a double charge) or a key with no effect (the retry is told
"done" for something that never happened). Together they are both there or both gone.

Two transactions racing on one key serialise on the primary key: the second ``INSERT``
waits for the first to commit (it then sees the recorded response) or to roll back (it then
claims the key itself). The table's DDL is in ``downstreams/wallet/migrations/0001_wallet.sql``;
copy it.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any, Literal

import asyncpg

from shared.db.identifiers import checked_identifier
from shared.tools.jcs import jcs


@dataclass(frozen=True)
class Claim:
    """``new``: apply, then record. ``replay``: return ``response``, apply nothing.
    ``reused``: the key was settled for a different request; refuse, apply nothing."""

    status: Literal["new", "replay", "reused"]
    response: dict[str, Any] | None = None


def request_hash(request: Any) -> str:
    """SHA-256 of the RFC 8785 form: key order and spelling of numbers cannot matter."""
    return hashlib.sha256(jcs(request)).hexdigest()


async def claim_key(conn: asyncpg.Connection, schema: str, operation_key: str,
                    hash_: str) -> Claim:
    table = _table(schema)
    inserted = await conn.fetchval(
        f"INSERT INTO {table} (operation_key, request_hash) VALUES ($1, $2) "
        "ON CONFLICT (operation_key) DO NOTHING RETURNING true", operation_key, hash_)
    if inserted:
        return Claim("new")
    row = await conn.fetchrow(
        f"SELECT request_hash, response FROM {table} WHERE operation_key = $1", operation_key)
    if row["request_hash"] != hash_:
        return Claim("reused")
    if row["response"] is None:
        raise RuntimeError(f"key {operation_key!r} was claimed without a recorded response")
    return Claim("replay", json.loads(row["response"]))


async def record_response(conn: asyncpg.Connection, schema: str, operation_key: str,
                          response: dict[str, Any]) -> None:
    status = await conn.execute(
        f"UPDATE {_table(schema)} SET response = $2::jsonb "
        "WHERE operation_key = $1 AND response IS NULL", operation_key, json.dumps(response))
    if status != "UPDATE 1":
        raise RuntimeError(f"key {operation_key!r} is not claimed in this transaction")


async def release_key(conn: asyncpg.Connection, schema: str, operation_key: str) -> None:
    """Undo a ``new`` claim of this transaction; a transaction waiting on the key then claims it."""
    status = await conn.execute(
        f"DELETE FROM {_table(schema)} WHERE operation_key = $1 AND response IS NULL",
        operation_key)
    if status != "DELETE 1":
        raise RuntimeError(f"key {operation_key!r} is not claimed in this transaction")


async def recorded_response(conn: asyncpg.Connection, schema: str,
                            operation_key: str) -> dict[str, Any] | None:
    """The status lookup by key (reconciliation's ``lookup_by_key``).

    It reads committed rows only: a claim still in flight is invisible to it. Call it after
    ``fences.admit`` for the same run, in the same transaction, as the request path does before
    claiming: the fence row lock then waits for any request of that run in flight, so "not
    found" is never answered while one is about to settle the key."""
    value = await conn.fetchval(
        f"SELECT response FROM {_table(schema)} WHERE operation_key = $1", operation_key)
    return json.loads(value) if value is not None else None


async def forget_keys(conn: asyncpg.Connection, schema: str, retention_s: float,
                      limit: int) -> int:
    """Forget up to ``limit`` settled keys claimed more than ``retention_s`` ago; how many.

    What a downstream with a key retention does (a payment API keeps a key for a day): a
    request under a forgotten key is new, and a lookup finds nothing. A claim in flight is
    skipped, never waited for: its transaction still owns the key."""
    table = _table(schema)
    return len(await conn.fetch(
        f"DELETE FROM {table} WHERE operation_key IN (SELECT operation_key FROM {table}"
        " WHERE created_at < now() - make_interval(secs => $1) AND response IS NOT NULL"
        " ORDER BY created_at LIMIT $2 FOR UPDATE SKIP LOCKED) RETURNING 1",
        float(retention_s), limit))


def _table(schema: str) -> str:
    return f'"{checked_identifier(schema)}".idempotency_keys'
