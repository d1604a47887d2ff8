"""The DBOS peer's pipeline (``dbos_peer.py``), apart from DBOS: the four steps' SQL, its tables,
the proposals it is given and the check that every workflow left exactly one row of each kind.
Each step takes a ``db`` with ``fetchrow`` and ``execute`` over ``%s`` placeholders, so the same
steps run as DBOS datasource transactions (``SessionDb``) and as ``DBOS.step``s over asyncpg
(``PoolDb``); every write is idempotent by key, so a step re-run after a crash changes nothing."""

from __future__ import annotations

import json
import uuid
from typing import Any

import asyncpg

WALLET_BALANCE = 10**12
AMOUNT_LIMIT = 10_000
ALLOWED_TOOLS = frozenset({"wallet.debit"})
APP_SCHEMA = "peer"


class SessionDb:
    """SQL with ``%s`` placeholders on the datasource transaction's connection (psycopg)."""

    def __init__(self, connection: Any) -> None:
        self._connection = connection

    async def fetchrow(self, sql: str, *args: Any) -> Any:
        return (await self._connection.exec_driver_sql(sql, args)).first()

    async def execute(self, sql: str, *args: Any) -> int:
        return (await self._connection.exec_driver_sql(sql, args)).rowcount


class PoolDb:
    """The same SQL on an asyncpg connection (``%s`` → ``$n``, prepared and cached by asyncpg)."""

    def __init__(self, connection: asyncpg.Connection) -> None:
        self._connection = connection

    async def fetchrow(self, sql: str, *args: Any) -> Any:
        return await self._connection.fetchrow(_dollars(sql), *args)

    async def execute(self, sql: str, *args: Any) -> int:
        return int((await self._connection.execute(_dollars(sql), *args)).split()[-1])


def _dollars(sql: str) -> str:
    parts = sql.split("%s")
    return "".join(part + (f"${index + 1}" if index < len(parts) - 1 else "")
                   for index, part in enumerate(parts))


async def intake(db: Any, proposal: dict) -> str:
    missing = [name for name in ("operation_key", "run_id", "tenant_id", "tool_name", "arguments")
               if not proposal.get(name)]
    amount = proposal.get("arguments", {}).get("amount_minor")
    if missing or not isinstance(amount, int) or amount <= 0:
        raise ValueError(f"invalid proposal: missing {missing}, amount {amount!r}")
    row = await db.fetchrow(
        f"INSERT INTO {APP_SCHEMA}.intents (logical_call_id, operation_key, run_id, tenant_id, tool_name,"
        " arguments, state) VALUES (%s, %s, %s, %s, %s, %s::jsonb, 'accepted')"
        " ON CONFLICT (operation_key) DO NOTHING RETURNING logical_call_id",
        uuid.uuid4(), proposal["operation_key"], proposal["run_id"], proposal["tenant_id"],
        proposal["tool_name"], json.dumps(proposal["arguments"]))
    if row is None:
        row = await db.fetchrow(f"SELECT logical_call_id FROM {APP_SCHEMA}.intents WHERE operation_key = %s",
                                proposal["operation_key"])
    return str(row[0])


async def decide(db: Any, call_id: str, proposal: dict) -> str:
    amount = proposal["arguments"]["amount_minor"]
    if proposal["tool_name"] not in ALLOWED_TOOLS:
        outcome, rule = "denied", "tool-not-allowed"
    elif amount > AMOUNT_LIMIT:
        outcome, rule = "denied", "amount-limit"
    else:
        outcome, rule = "allowed", "default-allow"
    await db.execute(f"INSERT INTO {APP_SCHEMA}.decisions (logical_call_id, outcome, rule)"
                     " VALUES (%s, %s, %s) ON CONFLICT (logical_call_id) DO NOTHING",
                     uuid.UUID(call_id), outcome, rule)
    return outcome


async def dispatch(db: Any, call_id: str, proposal: dict) -> bool:
    amount, wallet = proposal["arguments"]["amount_minor"], proposal["arguments"]["wallet_id"]
    inserted = await db.fetchrow(
        f"INSERT INTO {APP_SCHEMA}.debits (operation_key, logical_call_id, wallet_id, amount_minor)"
        " VALUES (%s, %s, %s, %s) ON CONFLICT (operation_key) DO NOTHING RETURNING 1",
        proposal["operation_key"], uuid.UUID(call_id), wallet, amount)
    if inserted is not None:
        updated = await db.execute(
            f"UPDATE {APP_SCHEMA}.wallets SET balance_minor = balance_minor - %s, version = version + 1"
            " WHERE id = %s AND balance_minor >= %s", amount, wallet, amount)
        if updated != 1:
            raise RuntimeError(f"wallet {wallet}: insufficient funds")
    return True


async def project(db: Any, call_id: str, outcome: str, debited: bool) -> None:
    await db.execute(
        f"INSERT INTO {APP_SCHEMA}.read_model (logical_call_id, state, updated_at)"
        " VALUES (%s, %s, now()) ON CONFLICT (logical_call_id)"
        " DO UPDATE SET state = excluded.state, updated_at = excluded.updated_at",
        uuid.UUID(call_id), "succeeded" if debited else outcome)


def new_proposal(wallets: int) -> dict:
    key = uuid.uuid4()
    return {"operation_key": f"op-{key.hex}", "run_id": f"run-{key.int % 200}", "tenant_id": "tenant-1",
            "tool_name": "wallet.debit",
            "arguments": {"wallet_id": f"w-{key.int % wallets}", "amount_minor": 1 + key.int % 999,
                          "currency": "EUR"}}


async def create_tables(url: str, wallets: int) -> None:
    conn = await asyncpg.connect(url)
    try:
        await conn.execute(f"""
CREATE SCHEMA {APP_SCHEMA};
CREATE TABLE {APP_SCHEMA}.intents (
    logical_call_id uuid PRIMARY KEY, operation_key text NOT NULL UNIQUE, run_id text NOT NULL,
    tenant_id text NOT NULL, tool_name text NOT NULL, arguments jsonb NOT NULL, state text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now());
CREATE TABLE {APP_SCHEMA}.decisions (
    logical_call_id uuid PRIMARY KEY, outcome text NOT NULL, rule text NOT NULL,
    issued_at timestamptz NOT NULL DEFAULT now());
CREATE TABLE {APP_SCHEMA}.wallets (
    id text PRIMARY KEY, balance_minor bigint NOT NULL CHECK (balance_minor >= 0),
    version bigint NOT NULL DEFAULT 1);
CREATE TABLE {APP_SCHEMA}.debits (
    operation_key text PRIMARY KEY, logical_call_id uuid NOT NULL,
    wallet_id text NOT NULL REFERENCES {APP_SCHEMA}.wallets (id),
    amount_minor bigint NOT NULL CHECK (amount_minor > 0), created_at timestamptz NOT NULL DEFAULT now());
CREATE TABLE {APP_SCHEMA}.read_model (
    logical_call_id uuid PRIMARY KEY, state text NOT NULL, updated_at timestamptz NOT NULL);
""")
        await conn.execute(f"INSERT INTO {APP_SCHEMA}.wallets (id, balance_minor) "
                           "SELECT 'w-' || g, $1 FROM generate_series(0, $2 - 1) AS g",
                           WALLET_BALANCE, wallets)
    finally:
        await conn.close()


async def check(url: str, workflows: int) -> None:
    """Exactly one row of each kind per workflow, and the money adds up."""
    conn = await asyncpg.connect(url)
    try:
        counts = {table: await conn.fetchval(f"SELECT count(*) FROM {APP_SCHEMA}.{table}")
                  for table in ("intents", "decisions", "debits", "read_model")}
        debited = await conn.fetchval(
            f"SELECT coalesce(sum(amount_minor), 0) FROM {APP_SCHEMA}.debits")
        spent = await conn.fetchval(f"SELECT sum($1 - balance_minor) FROM {APP_SCHEMA}.wallets",
                                    WALLET_BALANCE)
        statuses = dict(await conn.fetch(
            "SELECT status, count(*) FROM dbos.workflow_status GROUP BY status"))
    finally:
        await conn.close()
    problems = [f"{table}: {count} rows" for table, count in counts.items() if count != workflows]
    if debited != spent:
        problems.append(f"debits total {debited} but wallets lost {spent}")
    if statuses.get("SUCCESS", 0) != workflows or len(statuses) != 1:
        problems.append(f"workflow statuses {statuses}")
    if problems:
        raise RuntimeError(f"DBOS peer check failed ({workflows} workflows): {'; '.join(problems)}")
