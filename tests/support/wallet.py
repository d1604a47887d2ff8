"""Wallet fixtures shared by its Kafka and HTTP tests: unique wallets and keys, and what the
wallet's own tables say (the business outcome), read independently of the code under test."""

from __future__ import annotations

import uuid

from downstreams.wallet.repository import SCHEMA, open_wallet


def new_key() -> str:
    return f"op-{uuid.uuid4().hex[:12]}"


async def new_wallet(pool, balance_minor: int = 10_000, tenant: str = "acme") -> str:
    wallet_id = f"tenant/{tenant}/w-{uuid.uuid4().hex[:10]}"
    assert await open_wallet(pool, wallet_id, "EUR", balance_minor)
    return wallet_id


def debit(wallet_id: str, amount: int = 4000, currency: str = "EUR") -> dict:
    return {"wallet_id": wallet_id, "amount": amount, "currency": currency}


async def balance(pool, wallet_id: str) -> int:
    return await pool.fetchval(f"SELECT balance_minor FROM {SCHEMA}.wallets WHERE id = $1", wallet_id)


async def debits(pool, wallet_id: str) -> int:
    return await pool.fetchval(f"SELECT count(*) FROM {SCHEMA}.debits WHERE wallet_id = $1", wallet_id)


async def debits_under(pool, operation_key: str) -> int:
    return await pool.fetchval(f"SELECT count(*) FROM {SCHEMA}.debits WHERE operation_key = $1",
                               operation_key)


async def key_settled(pool, operation_key: str) -> bool:
    """Whether the key row exists: an unsettled refusal must leave none behind."""
    return await pool.fetchval(f"SELECT count(*) FROM {SCHEMA}.idempotency_keys "
                               "WHERE operation_key = $1", operation_key) == 1
