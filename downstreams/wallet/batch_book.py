"""The Kafka adapter's ``Book``: a consumed batch of requests and lookups decided in memory.

``load`` locks and reads, in three or four statements whatever the batch's size, every row
its requests may touch: the runs' fences and the keys (``shared.downstream.batch_keys``), the
wallets and, for refunds, the debits (``batch_rows.py``). ``answers.py`` then decides each
request in delivery order against this state, as the statements of ``SqlBook`` would have
changed it: a later request sees the fence, key, balance and refunds the earlier ones left.
``flush`` writes what changed in one statement. Rows are locked until commit, as
``SqlBook``'s are, so a concurrent transaction (the HTTP API, another replica) waits for the
batch and then sees it whole.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import asyncpg

from downstreams.wallet import batch_rows
from downstreams.wallet.answers import intent_hash
from downstreams.wallet.domain import Debit, Wallet
from downstreams.wallet.repository import SCHEMA
from shared.contracts.effect_requests import EffectRequested
from shared.downstream.batch_keys import BatchKeys
from shared.downstream.idempotent_write import Claim
from shared.downstream.versioned import VersionedRows
from shared.runs import RunKey


class BatchBook:
    def __init__(self, keys: BatchKeys, wallets: list[Wallet], debits: dict[str, Debit]) -> None:
        self._keys = keys
        self._wallets = VersionedRows(wallets, lambda wallet: wallet.id)
        self._debits = debits
        self._new_debits: list[tuple] = []
        self._new_refunds: list[tuple] = []

    @classmethod
    async def load(cls, conn: asyncpg.Connection, fences: list[tuple[RunKey, int]],
                   requests: list[EffectRequested], lookup_keys: list[str]) -> BatchBook:
        """``fences``: every (run, fence) the batch names, in delivery order."""
        claims = {r.operation_key: intent_hash(r) for r in reversed(requests)}  # the first's
        keys = await BatchKeys.load(conn, SCHEMA, fences, claims, lookup_keys)
        wallet_ids = {wallet_id for r in requests
                      if isinstance(wallet_id := r.canonical_arguments.get("wallet_id"), str)}
        debit_ids = {debit_id for r in requests
                     if isinstance(debit_id := r.canonical_arguments.get("debit_id"), str)}
        return cls(keys, await batch_rows.lock_wallets(conn, wallet_ids),
                   await batch_rows.lock_debits(conn, debit_ids))

    async def admit(self, run: RunKey, fence: int) -> bool:
        return self._keys.admit(run, fence)

    async def claim(self, operation_key: str, request_hash: str) -> Claim:
        return self._keys.claim(operation_key, request_hash)

    async def release(self, operation_key: str) -> None:
        self._keys.release(operation_key)

    async def record(self, operation_key: str, response: dict[str, Any]) -> None:
        self._keys.record(operation_key, response)

    async def recorded(self, operation_key: str) -> dict[str, Any] | None:
        return self._keys.recorded(operation_key)

    async def wallet(self, wallet_id: str) -> Wallet | None:
        return self._wallets.get(wallet_id)

    async def debit(self, debit_id: str) -> Debit | None:
        return self._debits.get(debit_id)

    async def add_debit(self, debit_id: str, wallet: Wallet, amount_minor: int,
                        request: EffectRequested) -> None:
        self._debits[debit_id] = Debit(debit_id, wallet.id, amount_minor, wallet.currency, 0)
        self._new_debits.append((debit_id, wallet.id, amount_minor, wallet.currency,
                                 *_attempt(request)))

    async def add_refund(self, refund_id: str, debit: Debit, amount_minor: int,
                         request: EffectRequested) -> None:
        self._debits[debit.debit_id] = dataclasses.replace(
            debit, refunded_minor=debit.refunded_minor + amount_minor)
        self._new_refunds.append((refund_id, debit.debit_id, debit.wallet_id, amount_minor,
                                  debit.currency, *_attempt(request)))

    async def change_balance(self, wallet: Wallet, delta_minor: int) -> int:
        return self._wallets.swap(wallet, balance_minor=wallet.balance_minor + delta_minor
                                  ).balance_minor

    async def flush(self, conn: asyncpg.Connection) -> None:
        await batch_rows.write(conn, self._keys, self._wallets,
                               debits=self._new_debits, refunds=self._new_refunds)


def _attempt(request: EffectRequested) -> tuple:
    return request.operation_key, request.logical_call_id, request.attempt, request.fence
