"""The SQL of ``BatchBook`` for the wallet's own rows: wallets and debits locked and read, and
the batch's changes written with its fences and keys (``shared.downstream.batch_keys``), in a
number of statements that does not depend on how many requests the batch holds. Every lock
is taken in key order, so two batches (or a batch and the HTTP API) wait, never deadlock."""

from __future__ import annotations

import asyncpg

from downstreams.wallet.domain import Debit, Wallet
from shared.db.plans import hidden
from shared.downstream.batch_keys import ATTEMPT, BatchKeys, columns, inserted
from shared.downstream.versioned import VersionedRows


async def lock_wallets(conn: asyncpg.Connection, ids: set[str]) -> list[Wallet]:
    if not ids:
        return []
    rows = await conn.fetch(
        "SELECT id, currency, balance_minor, version FROM wallet.wallets"
        f" WHERE id = ANY({hidden('$1', 'text[]')}) ORDER BY id FOR UPDATE", sorted(ids))
    return [Wallet(**row) for row in rows]


async def lock_debits(conn: asyncpg.Connection, ids: set[str]) -> dict[str, Debit]:
    if not ids:
        return {}
    rows = await conn.fetch(
        "SELECT d.debit_id, d.wallet_id, d.amount_minor, d.currency,"
        " coalesce((SELECT sum(r.amount_minor) FROM wallet.refunds r"
        "           WHERE r.debit_id = d.debit_id), 0)::bigint AS refunded_minor"
        f" FROM wallet.debits d WHERE d.debit_id = ANY({hidden('$1', 'text[]')})"
        " ORDER BY d.debit_id"
        " FOR UPDATE OF d", sorted(ids))
    return {row["debit_id"]: Debit(**row) for row in rows}


_DEBITS = (("debit_id", "text"), ("wallet_id", "text"), ("amount_minor", "int8"),
           ("currency", "text"), *ATTEMPT)
_REFUNDS = (("refund_id", "text"), ("debit_id", "text"), ("wallet_id", "text"),
            ("amount_minor", "int8"), ("currency", "text"), *ATTEMPT)


async def write(conn: asyncpg.Connection, keys: BatchKeys, wallets: VersionedRows, *,
                debits: list[tuple], refunds: list[tuple]) -> None:
    """One statement: balances swapped from the version read, debits and refunds inserted."""
    swapped, arguments, counted = wallets.written_back("w", "wallet.wallets", "id", "balance_minor")
    ctes = (swapped, inserted("d", "wallet.debits", _DEBITS, 5),
            inserted("r", "wallet.refunds", _REFUNDS, 5 + len(_DEBITS)))
    await keys.write(conn, ", ".join(ctes), [*arguments, *columns(debits, len(_DEBITS)),
                                             *columns(refunds, len(_REFUNDS))], counted)
