"""The SQL of ``BatchBook``: a batch's rows locked and read, and its changes written, in a
number of statements that does not depend on how many requests the batch holds. Every lock
is taken in key order, so two batches (or a batch and the HTTP API) wait, never deadlock."""

from __future__ import annotations

import json
from typing import Any

import asyncpg

from downstreams.wallet.domain import Debit, Wallet

_ATTEMPT = "operation_key, logical_call_id, attempt, fence"


async def lock_fences(conn: asyncpg.Connection, first: dict[str, int]) -> dict[str, int]:
    """Each scope's fence, locked: its stored value, or ``first`` inserted for a new one (the
    first request of a run no one has fenced is admitted, as ``fences.admit`` admits it)."""
    scopes = sorted(first)
    rows = await conn.fetch(
        "INSERT INTO wallet.fences AS f (scope, fence) SELECT * FROM unnest($1::text[], $2::int8[])"
        " ORDER BY 1 ON CONFLICT (scope) DO UPDATE SET fence = f.fence RETURNING scope, fence",
        scopes, [first[s] for s in scopes])
    return {row["scope"]: row["fence"] for row in rows}


async def claim_keys(conn: asyncpg.Connection, claims: dict[str, str],
                     lookups: list[str]) -> list[tuple[str, str | None, dict | None, bool]]:
    """Claim the free keys (``ours``); read the settled ones, and the keys looked up. A key
    claimed by a transaction that commits while we wait on it is in neither answer."""
    keys = sorted(claims)
    rows = await conn.fetch(
        "WITH claimed AS (INSERT INTO wallet.idempotency_keys (operation_key, request_hash)"
        "  SELECT * FROM unnest($1::text[], $2::text[]) ORDER BY 1"
        "  ON CONFLICT (operation_key) DO NOTHING RETURNING operation_key)"
        " SELECT operation_key, NULL::text AS request_hash, NULL::jsonb AS response, true AS ours"
        "   FROM claimed"
        " UNION ALL SELECT operation_key, request_hash, response, false"
        "   FROM wallet.idempotency_keys WHERE operation_key = ANY($3::text[])",
        keys, [claims[key] for key in keys], keys + lookups)
    return [(row["operation_key"], row["request_hash"],
             json.loads(row["response"]) if row["response"] is not None else None, row["ours"])
            for row in rows]


async def lock_wallets(conn: asyncpg.Connection, ids: set[str]) -> dict[str, Wallet]:
    if not ids:
        return {}
    rows = await conn.fetch(
        "SELECT id, currency, balance_minor, version FROM wallet.wallets WHERE id = ANY($1::text[])"
        " ORDER BY id FOR UPDATE", sorted(ids))
    return {row["id"]: Wallet(**row) for row in rows}


async def lock_debits(conn: asyncpg.Connection, ids: set[str]) -> dict[str, Debit]:
    if not ids:
        return {}
    rows = await conn.fetch(
        "SELECT d.debit_id, d.wallet_id, d.amount_minor, d.currency,"
        " coalesce((SELECT sum(r.amount_minor) FROM wallet.refunds r"
        "           WHERE r.debit_id = d.debit_id), 0)::bigint AS refunded_minor"
        " FROM wallet.debits d WHERE d.debit_id = ANY($1::text[]) ORDER BY d.debit_id"
        " FOR UPDATE OF d", sorted(ids))
    return {row["debit_id"]: Debit(**row) for row in rows}


async def write(conn: asyncpg.Connection, *, fences: dict[str, int],
                settled: dict[str, tuple[str, dict[str, Any]]], released: list[str],
                wallets: list[tuple[Wallet, int]], debits: list[tuple], refunds: list[tuple]) -> None:
    """One statement. ``wallets``: (changed wallet, version it was read at), swapped only
    from that version; ``settled`` keys are ours and unanswered, ``released`` ones ours."""
    row = await conn.fetchrow(
        "WITH f AS (UPDATE wallet.fences t SET fence = v.fence"
        "   FROM unnest($1::text[], $2::int8[]) AS v(scope, fence) WHERE t.scope = v.scope),"
        " k AS (UPDATE wallet.idempotency_keys t SET request_hash = v.h, response = v.r"
        "   FROM unnest($3::text[], $4::text[], $5::jsonb[]) AS v(key, h, r)"
        "   WHERE t.operation_key = v.key AND t.response IS NULL RETURNING 1),"
        " x AS (DELETE FROM wallet.idempotency_keys t"
        "   WHERE t.operation_key = ANY($6::text[]) AND t.response IS NULL RETURNING 1),"
        " w AS (UPDATE wallet.wallets t SET balance_minor = v.balance, version = v.version"
        "   FROM unnest($7::text[], $8::int8[], $9::int8[], $10::int8[]) AS v(id, read, balance, version)"
        "   WHERE t.id = v.id AND t.version = v.read RETURNING 1),"
        " d AS (INSERT INTO wallet.debits (debit_id, wallet_id, amount_minor, currency, "
        f"  {_ATTEMPT}) SELECT * FROM unnest($11::text[], $12::text[], $13::int8[], $14::text[],"
        "   $15::text[], $16::uuid[], $17::int4[], $18::int8[])),"
        " r AS (INSERT INTO wallet.refunds (refund_id, debit_id, wallet_id, amount_minor, currency,"
        f"  {_ATTEMPT}) SELECT * FROM unnest($19::text[], $20::text[], $21::text[], $22::int8[],"
        "   $23::text[], $24::text[], $25::uuid[], $26::int4[], $27::int8[]))"
        " SELECT (SELECT count(*) FROM k) AS settled, (SELECT count(*) FROM x) AS released,"
        " (SELECT count(*) FROM w) AS wallets",
        list(fences), list(fences.values()),
        list(settled), [h for h, _ in settled.values()],
        [json.dumps(response) for _, response in settled.values()], released,
        [w.id for w, _ in wallets], [read for _, read in wallets],
        [w.balance_minor for w, _ in wallets], [w.version for w, _ in wallets],
        *_columns(debits, 8), *_columns(refunds, 9))
    if (row["settled"], row["released"], row["wallets"]) != (len(settled), len(released),
                                                             len(wallets)):
        raise RuntimeError(f"the batch's rows changed under their locks: {dict(row)}")


def _columns(rows: list[tuple], width: int) -> list[list]:
    return [[row[n] for row in rows] for n in range(width)]
