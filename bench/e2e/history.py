"""A ledger with history (``--preload N``): N settled proposals already in every table before
the ramp runs again, so a figure that decays as the ledger grows shows in the same run.

The history is real before it is large. A seed of this run's own proposals goes through the
whole stack first; every row the seed wrote (in every table of the services' and the wallet's
schemas, found by the transactions that wrote them) is then copied in SQL, as many times as N
needs. Each copy renames what is the run's own: the run's nonce inside every text or JSON value
(runs, call ids, operation keys, wallets: ``bench-<nonce>h<k>-…``, which none of the run's own
queries match), a SHA-256 in hex inside one (a key derived from an operation key) and every
UUID, whether a column's type or a text's whole value (the same UUID the same way in every
table, so keys and joins stay consistent; its first 48 bits, a UUIDv7's milliseconds, are
kept). Serial columns take their defaults. The copies are settled history: nothing in them is
due, pending or unpublished, and they carry the seed's timestamps, so no retention removes them
before the ramp (the worst case for the hot path: every row still there).

Copying in SQL needs no knowledge of any service's schema, so a migration that adds a table or
a column is preloaded too; a copy that a new unique constraint refuses fails the run loudly.
"""

from __future__ import annotations

import time
from graphlib import TopologicalSorter
from typing import Any

import asyncpg

from bench.e2e.names import RunNames

SCHEMAS = ("proposal_intake", "policy", "dispatcher", "projection", "wallet")
"""Where a settled proposal leaves rows (the warehouse takes no part in the benchmark)."""
NOT_HISTORY = {"schema_migrations", "rate_buckets", "policy_versions", "health_samples"}
"""Tables of configuration or current state, not one row per proposal."""
COPIES_PER_STATEMENT = 10
"""Copies inserted per statement: large enough to amortise a statement, small enough that one
commit does not hold minutes of WAL."""
STATEMENT_TIMEOUT_S = 1800.0
"""A copy's statement may take far longer than the pool's ``command_timeout`` (30 s)."""

FUNCTIONS = ("""
CREATE FUNCTION pg_temp.history_uuid(u uuid, k int) RETURNS uuid
LANGUAGE sql IMMUTABLE AS $$
  SELECT (substr(u::text, 1, 14) || '7' || substr(h, 1, 3) || '-8' || substr(h, 4, 3) || '-'
          || substr(h, 7, 12))::uuid
  FROM md5(u::text || ':' || k) AS h
$$""", """
CREATE FUNCTION pg_temp.history_text(t text, nonce text, k int) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE WHEN t ~ '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$'
              THEN pg_temp.history_uuid(t::uuid, k)::text
              WHEN renamed ~ '[0-9a-f]{64}'
              THEN regexp_replace(renamed, '[0-9a-f]{64}', encode(sha256(convert_to(
                       substring(renamed FROM '[0-9a-f]{64}') || ':' || k, 'UTF8')), 'hex'))
              ELSE renamed END
  FROM replace(t, nonce, nonce || 'h' || k) AS renamed
$$""")
"""A copy's UUID (the same for the same UUID and copy, its UUIDv7 milliseconds kept) and text: a
UUID as text renamed as a UUID, the nonce renamed, and a SHA-256 in hex (a key derived from an
operation key, as the wallet keeps its idempotency keys) derived again per copy, the same way
wherever it appears."""


async def seed_marker(pool: asyncpg.Pool) -> int:
    """The transaction id from which rows are the seed's (32 bits, as ``xmin`` has them)."""
    return await pool.fetchval("SELECT (txid_current() % 4294967296)::bigint")


async def copy_history(pool: asyncpg.Pool, names: RunNames, since_xid: int,
                       seed_proposals: int, proposals: int,
                       schemas: tuple[str, ...] = SCHEMAS) -> dict[str, Any]:
    """Copies the seed's rows until the ledger holds ``proposals`` settled proposals of
    history; returns what was copied and how long it took."""
    copies = max(0, -(-(proposals - seed_proposals) // max(seed_proposals, 1)))
    began = time.monotonic()
    rows: dict[str, int] = {}
    async with pool.acquire() as conn:
        for function in FUNCTIONS:
            await conn.execute(function)
        try:
            for table in await _history_tables(conn, schemas):
                rows[table] = await _copy_table(conn, table, names.nonce, since_xid, copies)
        finally:
            await conn.execute("DROP FUNCTION pg_temp.history_uuid(uuid, int); "
                               "DROP FUNCTION pg_temp.history_text(text, text, int)")
        analyzed = time.monotonic()
        for table in rows:
            await conn.execute(f"VACUUM (ANALYZE) {table}", timeout=STATEMENT_TIMEOUT_S)
        size = await conn.fetchval("SELECT pg_size_pretty(pg_database_size(current_database()))")
    return {"proposals": seed_proposals * (copies + 1), "seed_proposals": seed_proposals,
            "copies": copies, "rows_copied": rows, "rows_copied_total": sum(rows.values()),
            "copy_s": round(analyzed - began, 1),
            "vacuum_analyze_s": round(time.monotonic() - analyzed, 1), "database_size": size}


async def _history_tables(conn: asyncpg.Connection, schemas: tuple[str, ...]) -> list[str]:
    """The tables to copy, each after the tables its foreign keys name."""
    found = await conn.fetch(
        "SELECT table_schema, table_name FROM information_schema.tables "
        "WHERE table_schema = ANY($1::text[]) AND table_type = 'BASE TABLE' "
        "ORDER BY table_schema, table_name", list(schemas))
    tables = [f"{r['table_schema']}.{r['table_name']}" for r in found
              if r["table_name"] not in NOT_HISTORY]
    references = await conn.fetch(
        "SELECT n.nspname || '.' || c.relname AS child, fn.nspname || '.' || f.relname AS parent "
        "FROM pg_constraint k JOIN pg_class c ON c.oid = k.conrelid "
        "JOIN pg_namespace n ON n.oid = c.relnamespace JOIN pg_class f ON f.oid = k.confrelid "
        "JOIN pg_namespace fn ON fn.oid = f.relnamespace "
        "WHERE k.contype = 'f' AND n.nspname = ANY($1::text[])", list(schemas))
    order = TopologicalSorter({table: set() for table in tables})
    for reference in references:  # one referring to its own table is met within a statement
        child, parent = reference["child"], reference["parent"]
        if child in tables and parent in tables and child != parent:
            order.add(child, parent)
    return list(order.static_order())


async def _copy_table(conn: asyncpg.Connection, table: str, nonce: str, since_xid: int,
                      copies: int) -> int:
    schema, name = table.split(".")
    columns = await conn.fetch(
        "SELECT column_name, data_type, udt_name, column_default, is_identity, is_generated "
        "FROM information_schema.columns WHERE table_schema = $1 AND table_name = $2 "
        "ORDER BY ordinal_position", schema, name)
    kept = [c for c in columns if not _takes_its_default(c)]
    targets = ", ".join(_quoted(c["column_name"]) for c in kept)
    values = ", ".join(_renamed(c) for c in kept)
    seed = f"history_seed_{name}"
    await conn.execute(f"CREATE TEMP TABLE {seed} AS SELECT * FROM {table} "  # no parameters
                       f"WHERE (xmin::text)::bigint >= {int(since_xid)}")  # in a utility statement
    try:
        seeded = await conn.fetchval(f"SELECT count(*) FROM {seed}")
        if not seeded or not copies:
            return 0
        for first in range(1, copies + 1, COPIES_PER_STATEMENT):
            last = min(copies, first + COPIES_PER_STATEMENT - 1)
            await conn.execute(
                f"INSERT INTO {table} ({targets}) SELECT {values} FROM {seed}, "
                f"generate_series($2::int, $3::int) AS k",
                nonce, first, last, timeout=STATEMENT_TIMEOUT_S)
        return seeded * copies
    finally:
        await conn.execute(f"DROP TABLE {seed}")


def _takes_its_default(column: asyncpg.Record) -> bool:
    default = column["column_default"] or ""
    return (column["is_identity"] == "YES" or column["is_generated"] == "ALWAYS"
            or default.startswith("nextval("))


def _renamed(column: asyncpg.Record) -> str:
    """The copy's value of one column in copy ``k`` ($1: the run's nonce)."""
    name, udt = _quoted(column["column_name"]), column["udt_name"]
    if udt == "uuid":
        return f"pg_temp.history_uuid({name}, k)"
    if udt in ("text", "varchar"):
        return f"pg_temp.history_text({name}, $1, k)"
    if udt in ("jsonb", "json"):
        return f"pg_temp.history_text({name}::text, $1, k)::{udt}"
    if udt == "_text":
        return f"pg_temp.history_text({name}::text, $1, k)::text[]"
    return name


def _quoted(identifier: str) -> str:
    return '"' + identifier.replace('"', '""') + '"'
