"""A throwaway service for backbone tests: one schema with the messaging tables and an
aggregate per key whose events carry consecutive versions, so order and once-ness show."""

from __future__ import annotations

import json
import uuid

import asyncpg

from shared.db.migrations import Migration, migrate, plan_for
from shared.db.unit_of_work import UnitOfWork
from shared.errors import PermanentError
from shared.messaging.consumer import IdempotentConsumer
from shared.messaging.envelope import Envelope
from shared.messaging.versioning import Advance, Transitions, VersionedTable, advance

PROBE_SQL = """
CREATE TABLE items (id text PRIMARY KEY, state text NOT NULL, version bigint NOT NULL);
CREATE TABLE applied (event_id uuid NOT NULL, item text NOT NULL, seq bigint NOT NULL,
                      applied_at timestamptz NOT NULL DEFAULT clock_timestamp(),
                      n bigint GENERATED ALWAYS AS IDENTITY);
"""
TRANSITIONS = Transitions({None: {"seen"}, "seen": {"seen"}})


class Probe:
    def __init__(self, pool: asyncpg.Pool, topic: str) -> None:
        self.pool = pool
        self.topic = topic
        self.schema = f"t_{uuid.uuid4().hex[:10]}"
        self.items = VersionedTable(self.schema, "items")

    async def create(self) -> Probe:
        async with self.pool.acquire() as conn:
            await migrate(conn, self.schema, plan_for() + [Migration("probe/0001", PROBE_SQL)])
        return self

    async def emit(self, keys: list[str], per_key: int, *, batch: int = 500) -> list[Envelope]:
        """Write ``per_key`` events for each key, interleaved, in transactions of ``batch``."""
        events = [Envelope.new(event_type="ProbeSeen", run_id=key, producer="probe",
                               payload={"item": key, "seq": seq})
                  for seq in range(1, per_key + 1) for key in keys]
        for start in range(0, len(events), batch):
            async with UnitOfWork(self.pool, self.schema) as uow:
                for envelope in events[start:start + batch]:
                    uow.emit(self.topic, envelope)
                await uow.commit()
        return events

    def consumer(self, name: str = "probe") -> IdempotentConsumer:
        return IdempotentConsumer(name, self.schema, self.pool, self.apply)

    async def apply(self, uow: UnitOfWork, envelope: Envelope) -> None:
        item, seq = envelope.payload["item"], envelope.payload["seq"]
        outcome = await advance(uow.connection, self.items, item, to_state="seen",
                                version=seq, transitions=TRANSITIONS)
        if outcome is not Advance.APPLIED:
            raise PermanentError(f"{item} seq {seq}: {outcome.value}")
        await uow.connection.execute(
            f'INSERT INTO "{self.schema}".applied (event_id, item, seq) VALUES ($1, $2, $3)',
            envelope.event_id, item, seq)

    async def fetchval(self, sql: str, *args):
        async with self.pool.acquire() as conn:
            return await conn.fetchval(sql.replace("{s}", f'"{self.schema}"'), *args)

    async def fetch(self, sql: str, *args):
        async with self.pool.acquire() as conn:
            return await conn.fetch(sql.replace("{s}", f'"{self.schema}"'), *args)

    async def outbox_status(self) -> dict[str, int]:
        rows = await self.fetch("SELECT status, count(*) AS n FROM {s}.outbox GROUP BY status")
        return {row["status"]: row["n"] for row in rows}

    async def applied_count(self) -> int:
        return await self.fetchval("SELECT count(*) FROM {s}.applied")

    async def insert_raw_outbox(self, *, event_id: uuid.UUID, topic: str, key: str,
                                envelope: str, headers: dict[str, str] | None = None) -> None:
        """A row as a buggy or older writer might leave it: no validation on the way in."""
        async with self.pool.acquire() as conn:
            await conn.execute(
                f'INSERT INTO "{self.schema}".outbox (event_id, topic, partition_key, headers, envelope) '
                "VALUES ($1, $2, $3, $4::jsonb, $5::jsonb)",
                event_id, topic, key, json.dumps(headers or {}), envelope)
