"""Dead letters of every service schema: listed for operators, and replayed to their topic.

Listing goes through ``query.dead_letters(...)``, which only the operator role may execute
(a dead letter has no tenant to isolate by). Replay re-publishes the record's original bytes
and headers to its original topic and partition, then stamps ``replayed_at``; the row is locked
meanwhile, so two operators cannot replay it at once. A crash between publish and stamp leaves
the row unstamped and a second replay publishes a copy: consumers deduplicate by event id.
Headers go out as recorded at dead-lettering: text, with bytes that were not UTF-8 replaced.
"""

from __future__ import annotations

import base64
import json
from datetime import datetime

import asyncpg
from aiokafka import AIOKafkaProducer

from services.query.errors import QueryError, not_found
from services.query.filters import DeadLetterFilters
from services.query.models import DeadLetter, Page
from services.query.paging import Keyset
from shared.db.identifiers import checked_identifier
from shared.messaging.kafka_security import client_options

DEAD_LETTERS = Keyset("dead_letters", (("created_at", "timestamptz"), ("schema_name", "text"),
                                       ("id", "bigint")))


async def list_dead_letters(conn: asyncpg.Connection, filters: DeadLetterFilters) -> Page[DeadLetter]:
    after = DEAD_LETTERS.decode(filters.after) if filters.after else (None, None, None)
    rows = await conn.fetch(
        "SELECT * FROM query.dead_letters($1, $2, $3, $4, $5::text::timestamptz, $6, "
        "$7::text::bigint, $8)",
        filters.schema_name, filters.topic, filters.since, filters.until, *after, filters.limit + 1)
    return Page[DeadLetter](items=[dead_letter(row) for row in rows[:filters.limit]],
                            next=DEAD_LETTERS.next_cursor(rows, filters.limit))


def dead_letter(row: asyncpg.Record) -> DeadLetter:
    value = row["value"]
    return DeadLetter(**{**row, "headers": json.loads(row["headers"]),
                         "value_base64": None if value is None else base64.b64encode(value).decode()})


class AlreadyReplayed(QueryError):
    def __init__(self, schema: str, id_: int, at: datetime) -> None:
        super().__init__(409, "already_replayed", f"{schema}.dead_letters #{id_} was replayed at "
                                                  f"{at.isoformat()}; --force replays it again")


async def replay(conn: asyncpg.Connection, bootstrap: str, schema: str, id_: int, *,
                 force: bool = False) -> DeadLetter:
    """Publish dead letter ``id_`` of ``schema`` again (acks=all, idempotent producer)."""
    schema = checked_identifier(schema)
    async with conn.transaction():
        try:
            row = await conn.fetchrow(f'SELECT $2::text AS schema_name, * FROM "{schema}".dead_letters '
                                      "WHERE id = $1 FOR UPDATE", id_, schema)
        except asyncpg.UndefinedTableError:
            raise not_found(f"schema {schema} with dead letters") from None
        if row is None:
            raise not_found(f"{schema}.dead_letters #{id_}")
        if "replayed_at" not in row.keys():
            raise QueryError(409, "not_migrated", f"{schema} has not applied messaging/0002 yet: "
                                                  "run `intentledger migrate`")
        if row["replayed_at"] is not None and not force:
            raise AlreadyReplayed(schema, id_, row["replayed_at"])
        await _publish(bootstrap, row)
        stamped = await conn.fetchrow(f'UPDATE "{schema}".dead_letters SET replayed_at = now() '
                                      "WHERE id = $1 RETURNING $2::text AS schema_name, *", id_, schema)
    return dead_letter(stamped)


async def _publish(bootstrap: str, row: asyncpg.Record) -> None:
    headers = json.loads(row["headers"])
    key = headers.get("run_id")  # the partition key of every ledger topic (docs/design.md §2)
    producer = AIOKafkaProducer(**client_options(bootstrap), acks="all", enable_idempotence=True)
    await producer.start()
    try:
        await producer.send_and_wait(row["topic"], row["value"], key=key.encode() if key else None,
                                     partition=row["kafka_partition"],
                                     headers=[(name, value.encode()) for name, value in headers.items()])
    finally:
        await producer.stop()
