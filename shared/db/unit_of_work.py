"""One PostgreSQL transaction for a state change, its outbox rows and its inbox markers.

Leaving the block without ``commit()`` rolls everything back, so a handler that raises half
way (or a crash) leaves neither the state nor the events nor the dedup marker behind.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from types import TracebackType

import asyncpg

from shared.db.identifiers import checked_identifier
from shared.messaging import emitted
from shared.messaging.envelope import Envelope
from shared.messaging.outbox import OutboxMessage, insert_outbox_rows


class UnitOfWork:
    def __init__(self, pool: asyncpg.Pool, schema: str) -> None:
        self._pool = pool
        self.schema = checked_identifier(schema)
        self._pending: list[OutboxMessage] = []
        self._committed = False

    async def __aenter__(self) -> UnitOfWork:
        self.connection: asyncpg.Connection = await self._pool.acquire()
        self._transaction = self.connection.transaction()
        try:
            await self._transaction.start()
        except BaseException:
            await self._pool.release(self.connection)
            raise
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, tb: TracebackType | None) -> None:
        try:
            if not self._committed:
                await self._transaction.rollback()
        except (asyncpg.InterfaceError, asyncpg.PostgresConnectionError):
            pass  # the connection is already gone; the server rolled back for us
        finally:
            await self._pool.release(self.connection)

    def emit(self, topic: str, envelope: Envelope) -> None:
        """Queue an event; it is written to the outbox inside this transaction at commit."""
        self._pending.append(OutboxMessage(topic=topic, envelope=envelope))

    @asynccontextmanager
    async def savepoint(self) -> AsyncIterator[None]:
        """A nested transaction; on failure its writes AND its emitted events are undone."""
        mark = len(self._pending)
        try:
            async with self.connection.transaction():
                yield
        except BaseException:
            del self._pending[mark:]
            raise

    async def claim(self, consumer: str, event_ids: Sequence[uuid.UUID]) -> set[uuid.UUID]:
        """Insert inbox markers; return the ids not seen before (the ones to apply)."""
        rows = await self.connection.fetch(
            f'INSERT INTO "{self.schema}".inbox (consumer, event_id) '
            "SELECT $1, unnest($2::uuid[]) ON CONFLICT DO NOTHING RETURNING event_id",
            consumer, list(event_ids),
        )
        return {row["event_id"] for row in rows}

    async def commit(self) -> None:
        pending, self._pending = self._pending, []
        if pending:
            await insert_outbox_rows(self.connection, self.schema, pending)
        await self._transaction.commit()
        self._committed = True
        emitted.count(self.schema, pending)
