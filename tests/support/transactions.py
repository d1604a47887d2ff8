"""Tests that write what no later test may find: their writes in a transaction rolled back."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import asyncpg


@asynccontextmanager
async def rolled_back(pool: asyncpg.Pool) -> AsyncIterator[asyncpg.Connection]:
    """A connection inside a transaction rolled back at the end: whatever the test wrote, the
    tests after it do not see."""
    async with pool.acquire() as conn:
        transaction = conn.transaction()
        await transaction.start()
        try:
            yield conn
        finally:
            await transaction.rollback()
