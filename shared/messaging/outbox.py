"""Writing outbox rows, and finding the outboxes. Only the relay reads rows back and publishes."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

import asyncpg

from shared.messaging.envelope import Envelope


@dataclass(frozen=True)
class OutboxMessage:
    topic: str
    envelope: Envelope

    @property
    def partition_key(self) -> str:
        return self.envelope.run_id


async def insert_outbox_rows(conn: asyncpg.Connection, schema: str,
                             messages: Sequence[OutboxMessage]) -> None:
    """One statement for the whole batch: rows keep their order in ``position``."""
    await conn.execute(
        f'INSERT INTO "{schema}".outbox (event_id, topic, partition_key, headers, envelope) '
        "SELECT e, t, k, h, v FROM unnest($1::uuid[], $2::text[], $3::text[], $4::jsonb[], $5::jsonb[])"
        " WITH ORDINALITY AS batch(e, t, k, h, v, n) ORDER BY n",
        [message.envelope.event_id for message in messages],
        [message.topic for message in messages],
        [message.partition_key for message in messages],
        [json.dumps(message.envelope.headers()) for message in messages],
        [message.envelope.model_dump_json() for message in messages],
    )


async def outbox_schemas(conn: asyncpg.Connection) -> list[str]:
    """Every schema with an outbox this connection's role can see."""
    rows = await conn.fetch(
        "SELECT table_schema FROM information_schema.tables "
        "WHERE table_name = 'outbox' AND table_type = 'BASE TABLE' ORDER BY table_schema"
    )
    return [row["table_schema"] for row in rows]
