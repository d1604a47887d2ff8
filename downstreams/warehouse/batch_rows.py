"""The SQL of ``BatchBook`` for the warehouse's own rows: reservations and stock locked and
read, and the batch's changes written with its fences and keys (``shared.downstream.
batch_keys``) in one statement. Locks are taken in key order: two batches wait, never
deadlock."""

from __future__ import annotations

import asyncpg

from downstreams.warehouse.domain import Reservation, Stock
from shared.db.plans import hidden, hidden_columns
from shared.downstream.batch_keys import ATTEMPT, BatchKeys, columns, inserted
from shared.downstream.versioned import VersionedRows


async def lock_reservations(conn: asyncpg.Connection, ids: set[str]) -> dict[str, Reservation]:
    if not ids:
        return {}
    rows = await conn.fetch(
        "SELECT reservation_id, sku, quantity FROM warehouse.reservations"
        f" WHERE reservation_id = ANY({hidden('$1', 'text[]')}) ORDER BY reservation_id"
        " FOR UPDATE", sorted(ids))
    if not rows:
        return {}
    # Its own statement, after the locks: a release committed while we waited is visible here.
    released = {row["reservation_id"] for row in await conn.fetch(
        "SELECT reservation_id FROM warehouse.releases"
        f" WHERE reservation_id = ANY({hidden('$1', 'text[]')})",
        [row["reservation_id"] for row in rows])}
    return {row["reservation_id"]: Reservation(**row, released=row["reservation_id"] in released)
            for row in rows}


async def lock_stock(conn: asyncpg.Connection, skus: set[str]) -> list[Stock]:
    if not skus:
        return []
    rows = await conn.fetch("SELECT sku, available, version FROM warehouse.stock"
                            f" WHERE sku = ANY({hidden('$1', 'text[]')}) ORDER BY sku FOR UPDATE",
                            sorted(skus))
    return [Stock(**row) for row in rows]


_RELEASES = (("reservation_id", "text"), ("quantity", "int8"), *ATTEMPT)
_SHIPMENTS = (("shipment_id", "text"), ("tenant", "text"), ("order_id", "text"),
              ("address", "text"), *ATTEMPT)


async def write(conn: asyncpg.Connection, keys: BatchKeys, stock: VersionedRows, *,
                reservations: list[tuple], releases: list[tuple], shipments: list[tuple]) -> None:
    """One statement: stock swapped from the version read, the batch's rows inserted. A
    reservation's tags come as a JSON array: ``unnest`` would flatten an array of arrays."""
    swapped, arguments, counted = stock.written_back("s", "warehouse.stock", "sku", "available")
    reserved = (
        "r AS (INSERT INTO warehouse.reservations (reservation_id, tenant, sku, order_id, quantity,"
        " tags, hold_until, operation_key, logical_call_id, attempt, fence)"
        " SELECT id, tenant, sku, order_id, quantity, ARRAY(SELECT jsonb_array_elements_text(tags)),"
        " hold_until, k, c, a, f FROM unnest(" + hidden_columns(
            5, "text[]", "text[]", "text[]", "text[]", "int8[]", "jsonb[]", "timestamptz[]",
            "text[]", "uuid[]", "int4[]", "int8[]") + ")"
        " AS v(id, tenant, sku, order_id, quantity, tags, hold_until, k, c, a, f))")
    ctes = (swapped, reserved, inserted("x", "warehouse.releases", _RELEASES, 16),
            inserted("h", "warehouse.shipments", _SHIPMENTS, 16 + len(_RELEASES)))
    await keys.write(conn, ", ".join(ctes), [
        *arguments, *columns(reservations, 11), *columns(releases, len(_RELEASES)),
        *columns(shipments, len(_SHIPMENTS))], counted)
