"""What deciding an effect request reads and writes, behind one interface with two adapters.

``answers.py`` decides a request or a lookup against a ``Book``: the run's fence, the key's
claim, the wallet and the debit rows. The HTTP API answers one request per transaction
through ``SqlBook``, statement by statement. The Kafka adapter answers a whole consumed batch
through ``BatchBook`` (``batch_book.py``): every row the batch may touch is locked and read in
a few statements, the batch is decided in memory in delivery order, and what changed is
written in one. One decision procedure for both ways in, so their answers cannot drift.
"""

from __future__ import annotations

from typing import Any, Protocol

import asyncpg

from downstreams.wallet import repository as repo
from downstreams.wallet.domain import Debit, Wallet
from downstreams.wallet.repository import SCHEMA
from shared.contracts.effect_requests import EffectRequested
from shared.downstream import fences
from shared.downstream.idempotent_write import (Claim, claim_key, record_response,
                                                recorded_response, release_key)
from shared.runs import RunKey


class Book(Protocol):
    async def admit(self, run: RunKey, fence: int) -> bool:
        """Raise the run's fence to ``fence`` unless it is lower; False means stale."""

    async def claim(self, operation_key: str, request_hash: str) -> Claim: ...

    async def release(self, operation_key: str) -> None: ...

    async def record(self, operation_key: str, response: dict[str, Any]) -> None: ...

    async def recorded(self, operation_key: str) -> dict[str, Any] | None: ...

    async def wallet(self, wallet_id: str) -> Wallet | None:
        """The wallet, locked until the transaction ends."""

    async def debit(self, debit_id: str) -> Debit | None:
        """The debit with what was refunded of it, locked until the transaction ends."""

    async def add_debit(self, debit_id: str, wallet: Wallet, amount_minor: int,
                        request: EffectRequested) -> None: ...

    async def add_refund(self, refund_id: str, debit: Debit, amount_minor: int,
                         request: EffectRequested) -> None: ...

    async def change_balance(self, wallet: Wallet, delta_minor: int) -> int:
        """Compare-and-swap on the version read under lock; returns the new balance."""


class SqlBook:
    """Each read and write one statement, on the caller's connection and transaction."""

    def __init__(self, conn: asyncpg.Connection) -> None:
        self._conn = conn

    async def admit(self, run: RunKey, fence: int) -> bool:
        return await fences.admit(self._conn, SCHEMA, run, fence)

    async def claim(self, operation_key: str, request_hash: str) -> Claim:
        return await claim_key(self._conn, SCHEMA, operation_key, request_hash)

    async def release(self, operation_key: str) -> None:
        await release_key(self._conn, SCHEMA, operation_key)

    async def record(self, operation_key: str, response: dict[str, Any]) -> None:
        await record_response(self._conn, SCHEMA, operation_key, response)

    async def recorded(self, operation_key: str) -> dict[str, Any] | None:
        return await recorded_response(self._conn, SCHEMA, operation_key)

    async def wallet(self, wallet_id: str) -> Wallet | None:
        return await repo.wallet_for_update(self._conn, wallet_id)

    async def debit(self, debit_id: str) -> Debit | None:
        return await repo.debit_for_update(self._conn, debit_id)

    async def add_debit(self, debit_id: str, wallet: Wallet, amount_minor: int,
                        request: EffectRequested) -> None:
        await repo.insert_debit(self._conn, debit_id, wallet, amount_minor, request)

    async def add_refund(self, refund_id: str, debit: Debit, amount_minor: int,
                         request: EffectRequested) -> None:
        await repo.insert_refund(self._conn, refund_id, debit, amount_minor, request)

    async def change_balance(self, wallet: Wallet, delta_minor: int) -> int:
        return await repo.change_balance(self._conn, wallet, delta_minor)
