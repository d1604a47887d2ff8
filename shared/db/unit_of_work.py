"""One PostgreSQL transaction for a state change, its outbox rows and its inbox markers.

Leaving the block without ``commit()`` rolls everything back, so a handler that raises half
way (or a crash) leaves neither the state nor the events nor the dedup marker behind.

A handler can also leave work for the end of the transaction: ``before_commit`` hooks run
inside it, after every handler of the batch (work done once per batch, not per event);
``after_commit`` hooks run once it is durable (what must never happen before: a crash point,
a metric).
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from types import TracebackType

import asyncpg

from shared.db.identifiers import checked_identifier
from shared.messaging import emitted
from shared.messaging.envelope import Envelope
from shared.messaging.outbox import OutboxMessage, insert_outbox_rows


Hook = Callable[[], Awaitable[None]]


class UnitOfWork:
    def __init__(self, pool: asyncpg.Pool, schema: str) -> None:
        self._pool = pool
        self.schema = checked_identifier(schema)
        self._pending: list[OutboxMessage] = []
        self._before: list[Hook] = []
        self._after: list[Hook] = []
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

    def before_commit(self, hook: Hook) -> None:
        """Run ``hook`` inside this transaction once the handlers are done (it may emit); a
        hook already registered (an equal one: the same bound method) is not added twice."""
        if hook not in self._before:
            self._before.append(hook)

    def after_commit(self, hook: Hook) -> None:
        """Run ``hook`` once this transaction has committed (never if it rolls back)."""
        self._after.append(hook)

    @asynccontextmanager
    async def savepoint(self) -> AsyncIterator[None]:
        """A nested transaction; on failure its writes, its emitted events and its hooks are
        undone."""
        marks = len(self._pending), len(self._before), len(self._after)
        try:
            async with self.connection.transaction():
                yield
        except BaseException:
            del self._pending[marks[0]:]
            del self._before[marks[1]:]
            del self._after[marks[2]:]
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
        for hook in self._before:
            await hook()
        pending, self._pending = self._pending, []
        if pending:
            await insert_outbox_rows(self.connection, self.schema, pending)
        await self._transaction.commit()
        self._committed = True
        emitted.count(self.schema, pending)
        for hook in self._after:
            await hook()
