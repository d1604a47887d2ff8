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

import asyncio
import time
from dataclasses import dataclass
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
WORKERS = 2
"""Connections inserting copies at once: one per core of the 2-core machine the committed runs
are measured on (the bench's pool holds four)."""
SEED_SCHEMA = "history_seed"
"""Where the seed's rows are set aside while they are copied (dropped after)."""
STATEMENT_TIMEOUT_S = 1800.0
"""A copy's statement may take far longer than the pool's ``command_timeout`` (30 s)."""

UUID_PATTERN = "^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$"
DIGEST_PATTERN = "[0-9a-f]{64}"
NONCE = "history_run.nonce"
"""The run's nonce, in a copy's statement."""


def renamed_uuid(value: str) -> str:
    """SQL for copy ``k``'s UUID of ``value`` (a UUID): the same for the same UUID and copy, a
    UUIDv7 with its milliseconds kept. Written out rather than called, so that it costs no
    function call per value."""
    digest = f"md5({value}::text || ':' || k)"
    return (f"(substr({value}::text, 1, 14) || '7' || substr({digest}, 1, 3) || '-8' || "
            f"substr({digest}, 4, 3) || '-' || substr({digest}, 7, 12))::uuid")


def renamed_text(value: str) -> str:
    """SQL for copy ``k``'s text of ``value``, whatever it holds: a UUID as text renamed as a
    UUID, the nonce (``NONCE``) renamed, and a SHA-256 in hex (a key derived from an operation
    key, as the wallet keeps its idempotency keys) derived again per copy, the same way wherever
    it appears. A column whose seed holds only some of these takes a cheaper form
    (``_renamed``)."""
    renamed = f"replace({value}, {NONCE}, {NONCE} || 'h' || k)"
    return (f"CASE WHEN {value} ~ '{UUID_PATTERN}' THEN {renamed_uuid(value)}::text"
            f" WHEN {renamed} ~ '{DIGEST_PATTERN}' THEN regexp_replace({renamed}, '{DIGEST_PATTERN}',"
            f" encode(sha256(convert_to(substring({renamed} FROM '{DIGEST_PATTERN}') || ':' || k,"
            f" 'UTF8')), 'hex')) ELSE {renamed} END")


async def seed_marker(pool: asyncpg.Pool) -> int:
    """The transaction id from which rows are the seed's (32 bits, as ``xmin`` has them)."""
    return await pool.fetchval("SELECT (txid_current() % 4294967296)::bigint")


async def copy_history(pool: asyncpg.Pool, names: RunNames, since_xid: int,
                       seed_proposals: int, proposals: int,
                       schemas: tuple[str, ...] = SCHEMAS) -> dict[str, Any]:
    """Copies the seed's rows until the ledger holds ``proposals`` settled proposals of
    history; returns what was copied and how long it took.

    The seed is set aside first (``SEED_SCHEMA``), then the copies are shared out among
    ``WORKERS`` connections, each inserting its own run of copies table after table (a copy's
    rows refer only to its own and to what was there before the seed): the insert is
    CPU-bound in PostgreSQL, so one connection leaves the other core idle."""
    copies = max(0, -(-(proposals - seed_proposals) // max(seed_proposals, 1)))
    began = time.monotonic()
    async with pool.acquire() as conn:
        await conn.execute(f"DROP SCHEMA IF EXISTS {SEED_SCHEMA} CASCADE; CREATE SCHEMA {SEED_SCHEMA}")
        try:
            plans = [await _set_aside(conn, table, names.nonce, since_xid)
                     for table in await _history_tables(conn, schemas)]
            share = -(-copies // WORKERS)
            await asyncio.gather(*(_copy(pool, plans, names.nonce, first, min(copies, first + share - 1))
                                   for first in range(1, copies + 1, share)))
        finally:
            await conn.execute(f"DROP SCHEMA {SEED_SCHEMA} CASCADE")
        analyzed = time.monotonic()
        for plan in plans:
            await conn.execute(f"VACUUM (ANALYZE) {plan.table}", timeout=STATEMENT_TIMEOUT_S)
        size = await conn.fetchval("SELECT pg_size_pretty(pg_database_size(current_database()))")
    rows = {plan.table: plan.seeded * copies for plan in plans}
    return {"proposals": seed_proposals * (copies + 1), "seed_proposals": seed_proposals,
            "copies": copies, "rows_copied": rows, "rows_copied_total": sum(rows.values()),
            "copy_s": round(analyzed - began, 1), "copy_workers": WORKERS,
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


@dataclass(frozen=True)
class _Plan:
    """One table's seed, set aside, and the statement that inserts copies $2 to $3 of it."""

    table: str
    seeded: int
    insert: str


async def _set_aside(conn: asyncpg.Connection, table: str, nonce: str, since_xid: int) -> _Plan:
    schema, name = table.split(".")
    columns = await conn.fetch(
        "SELECT column_name, data_type, udt_name, column_default, is_identity, is_generated "
        "FROM information_schema.columns WHERE table_schema = $1 AND table_name = $2 "
        "ORDER BY ordinal_position", schema, name)
    kept = [c for c in columns if not _takes_its_default(c)]
    seed = f"{SEED_SCHEMA}.{schema}__{name}"
    await conn.execute(f"CREATE UNLOGGED TABLE {seed} AS SELECT * FROM {table} "  # no parameters
                       f"WHERE (xmin::text)::bigint >= {int(since_xid)}")  # in a utility statement
    holds = await _what_columns_hold(conn, seed, nonce, kept)
    targets = ", ".join(_quoted(c["column_name"]) for c in kept)
    values = ", ".join(_renamed(c, holds.get(c["column_name"])) for c in kept)
    return _Plan(table, await conn.fetchval(f"SELECT count(*) FROM {seed}"),
                 f"INSERT INTO {table} ({targets}) SELECT {values} FROM {seed}, "
                 "generate_series($2::int, $3::int) AS k, (SELECT $1::text AS nonce) AS history_run")


async def _copy(pool: asyncpg.Pool, plans: list[_Plan], nonce: str, first: int, last: int) -> None:
    """Copies ``first`` to ``last`` of every table, in the order of ``plans``."""
    async with pool.acquire() as conn:
        for plan in plans:
            if not plan.seeded:
                continue
            for low in range(first, last + 1, COPIES_PER_STATEMENT):
                high = min(last, low + COPIES_PER_STATEMENT - 1)
                await conn.execute(plan.insert, nonce, low, high, timeout=STATEMENT_TIMEOUT_S)


TEXTUAL = {"text": "", "varchar": "", "jsonb": "::text", "json": "::text", "_text": "::text"}
"""Column types whose values are renamed as text, and the cast that reads one as text."""


async def _what_columns_hold(conn: asyncpg.Connection, seed: str, nonce: str,
                             columns: list[asyncpg.Record]) -> dict[str, dict[str, bool]]:
    """Per textual column, what its seed values hold: a UUID as a whole value (``uuid``; every
    value one, or NULL: ``only_uuid``), the nonce, a SHA-256 in hex. One scan of the seed."""
    textual = [c for c in columns if c["udt_name"] in TEXTUAL]
    if not textual:
        return {}
    probes = []
    for n, column in enumerate(textual):
        value = f"{_quoted(column['column_name'])}{TEXTUAL[column['udt_name']]}"
        probes.append(f"bool_or({value} ~ '{UUID_PATTERN}') AS uuid_{n}, "
                      f"bool_and({value} IS NULL OR {value} ~ '{UUID_PATTERN}') AS only_uuid_{n}, "
                      f"bool_or(strpos({value}, $1) > 0) AS nonce_{n}, "
                      f"bool_or({value} ~ '{DIGEST_PATTERN}') AS digest_{n}")
    row = await conn.fetchrow(f"SELECT {', '.join(probes)} FROM {seed}", nonce)
    return {column["column_name"]: {kind: bool(row[f"{kind}_{n}"])
                                    for kind in ("uuid", "only_uuid", "nonce", "digest")}
            for n, column in enumerate(textual)}


def _takes_its_default(column: asyncpg.Record) -> bool:
    default = column["column_default"] or ""
    return (column["is_identity"] == "YES" or column["is_generated"] == "ALWAYS"
            or default.startswith("nextval("))


def _renamed(column: asyncpg.Record, holds: dict[str, bool] | None) -> str:
    """The copy's value of one column in copy ``k``, in the cheapest form
    that renames every value its seed ``holds`` as ``renamed_text`` would: most columns hold
    none of what is renamed (a state, a tool's name) or only one kind of it."""
    name, udt = _quoted(column["column_name"]), column["udt_name"]
    if udt == "uuid":
        return renamed_uuid(name)
    if holds is None or not (holds["uuid"] or holds["nonce"] or holds["digest"]):
        return name
    cast = "" if udt in ("text", "varchar") else f"::{'text[]' if udt == '_text' else udt}"
    value = f"{name}{TEXTUAL[udt]}"
    if holds["only_uuid"]:
        return f"{renamed_uuid(value)}::text{cast}"
    if not holds["uuid"] and not holds["digest"]:
        return f"replace({value}, {NONCE}, {NONCE} || 'h' || k){cast}"
    return f"({renamed_text(value)}){cast}"


def _quoted(identifier: str) -> str:
    return '"' + identifier.replace('"', '""') + '"'
