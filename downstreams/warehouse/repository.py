"""The warehouse's SQL. Rows read for a decision are locked until the transaction ends."""

from __future__ import annotations

import asyncpg

from downstreams.warehouse.contracts import ReserveArguments, ShipmentArguments
from downstreams.warehouse.domain import Reservation, Stock
from shared.contracts.effect_requests import EffectRequested

SCHEMA = "warehouse"


async def stock_for_update(conn: asyncpg.Connection, sku: str) -> Stock | None:
    row = await conn.fetchrow(
        "SELECT sku, available, version FROM warehouse.stock WHERE sku = $1 FOR UPDATE", sku)
    return Stock(**row) if row else None


async def change_available(conn: asyncpg.Connection, stock: Stock, delta: int) -> int:
    """Compare-and-swap on the version read under lock; returns the new availability."""
    available = await conn.fetchval(
        "UPDATE warehouse.stock SET available = available + $3, version = version + 1"
        " WHERE sku = $1 AND version = $2 RETURNING available", stock.sku, stock.version, delta)
    if available is None:
        raise RuntimeError(f"stock of {stock.sku} changed under its row lock")
    return available


async def reservation_for_update(conn: asyncpg.Connection,
                                 reservation_id: str) -> Reservation | None:
    row = await conn.fetchrow(
        "SELECT reservation_id, sku, quantity FROM warehouse.reservations"
        " WHERE reservation_id = $1 FOR UPDATE", reservation_id)
    if row is None:
        return None
    # Its own statement, after the lock: a release committed while we waited is visible here.
    released = await conn.fetchval(
        "SELECT EXISTS (SELECT 1 FROM warehouse.releases WHERE reservation_id = $1)",
        reservation_id)
    return Reservation(**row, released=released)


async def insert_reservation(conn: asyncpg.Connection, reservation_id: str, tenant: str,
                             args: ReserveArguments, request: EffectRequested) -> None:
    await conn.execute(
        "INSERT INTO warehouse.reservations (reservation_id, tenant, sku, order_id, quantity,"
        " tags, hold_until, operation_key, logical_call_id, attempt, fence)"
        " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
        reservation_id, tenant, args.sku, args.order_id, args.quantity, list(args.tags),
        args.hold_until, request.operation_key, request.logical_call_id, request.attempt,
        request.fence)


async def insert_release(conn: asyncpg.Connection, reservation: Reservation,
                         request: EffectRequested) -> None:
    await conn.execute(
        "INSERT INTO warehouse.releases (reservation_id, quantity, operation_key,"
        " logical_call_id, attempt, fence) VALUES ($1, $2, $3, $4, $5, $6)",
        reservation.reservation_id, reservation.quantity, request.operation_key,
        request.logical_call_id, request.attempt, request.fence)


async def insert_shipment(conn: asyncpg.Connection, shipment_id: str, tenant: str,
                          args: ShipmentArguments, request: EffectRequested) -> None:
    await conn.execute(
        "INSERT INTO warehouse.shipments (shipment_id, tenant, order_id, address, operation_key,"
        " logical_call_id, attempt, fence) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
        shipment_id, tenant, args.order_id, args.address, request.operation_key,
        request.logical_call_id, request.attempt, request.fence)


async def insert_stock(conn: asyncpg.Connection, sku: str, available: int) -> bool:
    status = await conn.execute(
        "INSERT INTO warehouse.stock (sku, available) VALUES ($1, $2) ON CONFLICT (sku) DO NOTHING",
        sku, available)
    return status == "INSERT 0 1"
