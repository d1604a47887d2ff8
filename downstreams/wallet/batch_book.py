"""The Kafka adapter's ``Book``: a consumed batch of requests and lookups decided in memory.

``load`` locks and reads, in three or four statements whatever the batch's size, every row
its requests may touch (``batch_rows.py``): the runs' fences (inserted at the first fence the
batch names when new, as the first request's ``admit`` would), the keys (claimed where free,
read where settled), the wallets and, for refunds, the debits. ``answers.py`` then decides
each request in delivery order against this state, as the statements of ``SqlBook`` would
have changed it: a later request sees the fence, key, balance and refunds the earlier ones
left. ``flush`` writes what changed in one statement. Rows are locked until commit, as
``SqlBook``'s are, so a concurrent transaction (the HTTP API, another replica) waits for the
batch and then sees it whole.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import asyncpg

from downstreams.wallet import batch_rows
from downstreams.wallet.answers import intent_hash
from downstreams.wallet.domain import Debit, Wallet
from shared.contracts.effect_requests import EffectRequested
from shared.downstream.fences import scope
from shared.downstream.idempotent_write import Claim
from shared.errors import RetryableError
from shared.runs import RunKey


class RaceLost(RetryableError):
    """A key was claimed by a transaction that committed after this batch's snapshot: the
    batch rolls back and is delivered again, when the key reads as settled."""


@dataclass
class _Key:
    request_hash: str | None
    """Whose claim holds the key; None while it is free (claimed by us, not yet used)."""
    response: dict[str, Any] | None = None
    ours: bool = False
    """Inserted by this batch: written back settled, or deleted if it ends unsettled."""


class BatchBook:
    def __init__(self, fences: dict[str, int], keys: dict[str, _Key], wallets: dict[str, Wallet],
                 debits: dict[str, Debit]) -> None:
        self._fences, self._loaded_fences = fences, dict(fences)
        self._keys = keys
        self._wallets, self._read_versions = wallets, {w.id: w.version for w in wallets.values()}
        self._debits = debits
        self._new_debits: list[tuple] = []
        self._new_refunds: list[tuple] = []

    @classmethod
    async def load(cls, conn: asyncpg.Connection, fences: list[tuple[RunKey, int]],
                   requests: list[EffectRequested], lookup_keys: list[str]) -> BatchBook:
        """``fences``: every (run, fence) the batch names, in delivery order."""
        first: dict[str, int] = {}
        for run, fence in fences:
            first.setdefault(scope(run), fence)
        locked_fences = await batch_rows.lock_fences(conn, first)  # first, as ``answer`` does
        claims = {r.operation_key: intent_hash(r) for r in reversed(requests)}  # the first's
        keys: dict[str, _Key] = {}
        for key, request_hash, response, ours in await batch_rows.claim_keys(
                conn, claims, lookup_keys):
            keys[key] = _Key(None, None, True) if ours else _Key(request_hash, response)
        if missing := set(claims) - set(keys):
            raise RaceLost(f"keys claimed meanwhile by another transaction: {sorted(missing)}")
        wallet_ids = {wallet_id for r in requests
                      if isinstance(wallet_id := r.canonical_arguments.get("wallet_id"), str)}
        debit_ids = {debit_id for r in requests
                     if isinstance(debit_id := r.canonical_arguments.get("debit_id"), str)}
        return cls(locked_fences, keys, await batch_rows.lock_wallets(conn, wallet_ids),
                   await batch_rows.lock_debits(conn, debit_ids))

    async def admit(self, run: RunKey, fence: int) -> bool:
        current = max(self._fences[scope(run)], fence)
        self._fences[scope(run)] = current
        return current == fence

    async def claim(self, operation_key: str, request_hash: str) -> Claim:
        key = self._keys[operation_key]
        if key.request_hash is None:
            key.request_hash = request_hash
            return Claim("new")
        if key.request_hash != request_hash:
            return Claim("reused")
        if key.response is None:
            raise RuntimeError(f"key {operation_key!r} was claimed without a recorded response")
        return Claim("replay", key.response)

    async def release(self, operation_key: str) -> None:
        self._keys[operation_key].request_hash = None

    async def record(self, operation_key: str, response: dict[str, Any]) -> None:
        self._keys[operation_key].response = response

    async def recorded(self, operation_key: str) -> dict[str, Any] | None:
        key = self._keys.get(operation_key)
        return key.response if key is not None else None

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
        if self._wallets[wallet.id].version != wallet.version:
            raise RuntimeError(f"wallet {wallet.id} changed under its row lock")
        changed = dataclasses.replace(wallet, balance_minor=wallet.balance_minor + delta_minor,
                                      version=wallet.version + 1)
        self._wallets[wallet.id] = changed
        return changed.balance_minor

    async def flush(self, conn: asyncpg.Connection) -> None:
        settled = {k: key for k, key in self._keys.items()
                   if key.ours and key.response is not None}
        await batch_rows.write(
            conn,
            fences={s: f for s, f in self._fences.items() if f != self._loaded_fences[s]},
            settled={k: (key.request_hash, key.response) for k, key in settled.items()},
            released=[k for k, key in self._keys.items() if key.ours and k not in settled],
            wallets=[(w, self._read_versions[w.id]) for w in self._wallets.values()
                     if w.version != self._read_versions[w.id]],
            debits=self._new_debits, refunds=self._new_refunds)


def _attempt(request: EffectRequested) -> tuple:
    return request.operation_key, request.logical_call_id, request.attempt, request.fence
