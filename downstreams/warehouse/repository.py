"""The warehouse's SQL outside a batch (a batch's own is ``batch_rows.py``)."""

from __future__ import annotations

import asyncpg

SCHEMA = "warehouse"


async def insert_stock(conn: asyncpg.Connection, sku: str, available: int) -> bool:
    status = await conn.execute(
        "INSERT INTO warehouse.stock (sku, available) VALUES ($1, $2) ON CONFLICT (sku) DO NOTHING",
        sku, available)
    return status == "INSERT 0 1"
