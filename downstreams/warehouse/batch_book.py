"""A consumed batch of warehouse requests and lookups, decided in memory in delivery order.

``load`` locks and reads, in a few statements whatever the batch's size, every row its
requests may touch: the runs' fences and the keys (``shared.downstream.batch_keys``), the
reservations its releases name (then, in a statement of their own, whether each was released:
a release committed while we waited on the lock is seen) and the stock of every SKU involved.
The handlers and ``operations.py`` then decide each request against this state as the
requests before it left it, and ``flush`` writes what changed in one statement. The rows stay
locked until commit, so another replica's batch waits for this one and then sees it whole.
"""

from __future__ import annotations

import dataclasses
import json

import asyncpg

from downstreams.warehouse import batch_rows
from downstreams.warehouse.contracts import ReserveArguments, ShipmentArguments
from downstreams.warehouse.domain import Reservation, Stock
from downstreams.warehouse.repository import SCHEMA
from shared.contracts.effect_requests import EffectRequested
from shared.downstream.batch_keys import BatchKeys
from shared.downstream.versioned import VersionedRows
from shared.runs import RunKey


class BatchBook:
    def __init__(self, keys: BatchKeys, reservations: dict[str, Reservation],
                 stock: list[Stock]) -> None:
        self.keys = keys
        self._reservations = reservations
        self._stock = VersionedRows(stock, lambda row: row.sku)
        self._new: dict[str, list[tuple]] = {"reservations": [], "releases": [], "shipments": []}

    @classmethod
    async def load(cls, conn: asyncpg.Connection, fences: list[tuple[RunKey, int]],
                   claims: dict[str, str], lookups: list[str],
                   requests: list[EffectRequested]) -> BatchBook:
        keys = await BatchKeys.load(conn, SCHEMA, fences, claims, lookups)
        named = {name: {value for r in requests
                        if isinstance(value := r.canonical_arguments.get(name), str)}
                 for name in ("reservation_id", "sku")}
        reservations = await batch_rows.lock_reservations(conn, named["reservation_id"])
        stock = await batch_rows.lock_stock(
            conn, named["sku"] | {r.sku for r in reservations.values()})
        return cls(keys, reservations, stock)

    def stock(self, sku: str) -> Stock | None:
        return self._stock.get(sku)

    def reservation(self, reservation_id: str) -> Reservation | None:
        return self._reservations.get(reservation_id)

    def add_reservation(self, reservation_id: str, tenant: str, args: ReserveArguments,
                        request: EffectRequested) -> None:
        self._reservations[reservation_id] = Reservation(reservation_id, args.sku, args.quantity,
                                                         released=False)
        self._new["reservations"].append((
            reservation_id, tenant, args.sku, args.order_id, args.quantity,
            json.dumps(list(args.tags)), args.hold_until, *_attempt(request)))

    def add_release(self, reservation: Reservation, request: EffectRequested) -> None:
        self._reservations[reservation.reservation_id] = dataclasses.replace(reservation,
                                                                             released=True)
        self._new["releases"].append((reservation.reservation_id, reservation.quantity,
                                      *_attempt(request)))

    def add_shipment(self, shipment_id: str, tenant: str, args: ShipmentArguments,
                     request: EffectRequested) -> None:
        self._new["shipments"].append((shipment_id, tenant, args.order_id, args.address,
                                       *_attempt(request)))

    def change_available(self, stock: Stock, delta: int) -> int:
        """Compare-and-swap on the version read under lock; returns the new availability."""
        return self._stock.swap(stock, available=stock.available + delta).available

    async def flush(self, conn: asyncpg.Connection) -> None:
        await batch_rows.write(conn, self.keys, self._stock, **self._new)


def _attempt(request: EffectRequested) -> tuple:
    return request.operation_key, request.logical_call_id, request.attempt, request.fence
