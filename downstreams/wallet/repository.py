"""The wallet's SQL. Rows read for a decision are locked until the transaction ends."""

from __future__ import annotations

import asyncpg

from downstreams.wallet.domain import Debit, Wallet
from shared.tools.tenancy import tenant_of
from shared.contracts.effect_requests import EffectRequested

SCHEMA = "wallet"


async def wallet_for_update(conn: asyncpg.Connection, wallet_id: str) -> Wallet | None:
    row = await conn.fetchrow(
        "SELECT id, currency, balance_minor, version FROM wallet.wallets WHERE id = $1 FOR UPDATE",
        wallet_id)
    return Wallet(**row) if row else None


async def debit_for_update(conn: asyncpg.Connection, debit_id: str) -> Debit | None:
    row = await conn.fetchrow(
        "SELECT d.debit_id, d.wallet_id, d.amount_minor, d.currency,"
        " coalesce((SELECT sum(r.amount_minor) FROM wallet.refunds r"
        "           WHERE r.debit_id = d.debit_id), 0)::bigint AS refunded_minor"
        " FROM wallet.debits d WHERE d.debit_id = $1 FOR UPDATE OF d", debit_id)
    return Debit(**row) if row else None


async def change_balance(conn: asyncpg.Connection, wallet: Wallet, delta_minor: int) -> int:
    """Compare-and-swap on the version read under lock; returns the new balance."""
    balance = await conn.fetchval(
        "UPDATE wallet.wallets SET balance_minor = balance_minor + $3, version = version + 1"
        " WHERE id = $1 AND version = $2 RETURNING balance_minor",
        wallet.id, wallet.version, delta_minor)
    if balance is None:
        raise RuntimeError(f"wallet {wallet.id} changed under its row lock")
    return balance


async def insert_debit(conn: asyncpg.Connection, debit_id: str, wallet: Wallet, amount_minor: int,
                       request: EffectRequested) -> None:
    await conn.execute(
        "INSERT INTO wallet.debits (debit_id, wallet_id, amount_minor, currency, operation_key,"
        " logical_call_id, attempt, fence) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
        debit_id, wallet.id, amount_minor, wallet.currency, request.operation_key,
        request.logical_call_id, request.attempt, request.fence)


async def insert_refund(conn: asyncpg.Connection, refund_id: str, debit: Debit, amount_minor: int,
                        request: EffectRequested) -> None:
    await conn.execute(
        "INSERT INTO wallet.refunds (refund_id, debit_id, wallet_id, amount_minor, currency,"
        " operation_key, logical_call_id, attempt, fence) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
        refund_id, debit.debit_id, debit.wallet_id, amount_minor, debit.currency,
        request.operation_key, request.logical_call_id, request.attempt, request.fence)


async def open_wallet(pool: asyncpg.Pool, wallet_id: str, currency: str, balance_minor: int) -> bool:
    """Seed a wallet (demo and tests); False when it already exists."""
    status = await pool.execute(
        "INSERT INTO wallet.wallets (id, tenant, currency, balance_minor) VALUES ($1, $2, $3, $4)"
        " ON CONFLICT (id) DO NOTHING", wallet_id, tenant_of(wallet_id), currency.upper(),
        balance_minor)
    return status == "INSERT 0 1"
