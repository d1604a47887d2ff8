"""Bounded inbox and dead-letter tables, purged in bounded batches.

An inbox row is what makes a redelivered record change nothing, so it may go only once no copy
of its record can be delivered again: after the longest retention of the topics the service
consumes, plus a margin for clocks and a slow consumer. The horizon is therefore never the
configured one alone: it is read from the broker (each consumed topic's ``retention.ms``) and
the longer of the two is used; a topic that keeps records for ever keeps the inbox for ever.
Dead letters are kept for a configured age (long enough to be looked at and replayed).
Each purge deletes at most ``batch`` rows per statement, so it never holds long locks.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

import asyncpg
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from shared.db.housekeeping import in_batches
from shared.db.identifiers import checked_identifier
from shared.messaging.kafka_security import client_options

log = logging.getLogger(__name__)
_UNKNOWN_TOPIC = 3
"""UNKNOWN_TOPIC_OR_PARTITION: the broker answering has not learned of the topic yet."""
_PATIENCE = 50


class RetentionSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="INTENTLEDGER_RETENTION_", extra="ignore")

    inbox_s: float = Field(default=15 * 86400.0, gt=0)
    """Inbox rows older than this may go, if no consumed topic keeps its records longer."""
    inbox_margin_s: float = Field(default=86400.0, ge=0)
    """Added to the longest topic retention: what a slow consumer or a clock may still need."""
    dead_letters_s: float = Field(default=30 * 86400.0, gt=0)
    interval_s: float = Field(default=600.0, gt=0)
    batch: int = Field(default=5000, ge=1)


class RetentionUnknown(RuntimeError):
    """The broker did not say how long it keeps a topic's records."""


@dataclass(frozen=True)
class Horizon:
    inbox_s: float | None
    """None: a consumed topic keeps its records for ever, so no inbox row may go."""
    dead_letters_s: float


async def topic_retention_s(bootstrap: str, topics: list[str]) -> dict[str, float | None]:
    """Each topic's ``retention.ms`` on the broker, in seconds; None for ``-1`` (for ever). A
    topic created a moment ago may not be known to the broker answering yet: asked again."""
    admin = AIOKafkaAdminClient(**client_options(bootstrap))
    await admin.start()
    try:
        for _ in range(_PATIENCE):
            found = await _retentions(admin, topics)
            if found is not None:
                return found
            await asyncio.sleep(0.2)
    finally:
        await admin.close()
    raise RetentionUnknown(f"the broker does not know one of {topics}")


async def _retentions(admin: AIOKafkaAdminClient, topics: list[str]
                      ) -> dict[str, float | None] | None:
    """None while a topic is still unknown to the broker."""
    responses = await admin.describe_configs(
        [ConfigResource(ConfigResourceType.TOPIC, topic, {"retention.ms": None}) for topic in topics])
    found: dict[str, float | None] = {}
    for response in responses:
        for error_code, error_message, _, name, entries, *_ in response.resources:
            if error_code == _UNKNOWN_TOPIC:
                return None
            if error_code:
                raise RetentionUnknown(f"retention of {name}: {error_message} ({error_code})")
            for entry in entries:
                if entry[0] == "retention.ms":
                    milliseconds = int(entry[1])
                    found[name] = None if milliseconds < 0 else milliseconds / 1000.0
    missing = set(topics) - set(found)
    if missing:
        raise RetentionUnknown(f"the broker named no retention for {sorted(missing)}")
    return found


def horizon(settings: RetentionSettings, retentions: dict[str, float | None]) -> Horizon:
    """The configured ages, with the inbox's raised to cover every consumed topic."""
    if any(seconds is None for seconds in retentions.values()):
        return Horizon(None, settings.dead_letters_s)
    longest = max(retentions.values(), default=0.0)
    return Horizon(max(settings.inbox_s, longest + settings.inbox_margin_s),
                   settings.dead_letters_s)


async def purge(pool: asyncpg.Pool, schema: str, limits: Horizon, batch: int) -> tuple[int, int]:
    """(inbox rows, dead letters) deleted: all older than the horizon, ``batch`` at a time."""
    schema = checked_identifier(schema)
    inbox = 0
    if limits.inbox_s is not None:
        inbox = await _in_batches(
            pool, f'DELETE FROM "{schema}".inbox WHERE ctid = ANY(ARRAY('
            f'SELECT ctid FROM "{schema}".inbox WHERE processed_at < now() - '
            "make_interval(secs => $1) LIMIT $2))", limits.inbox_s, batch)
    letters = await _in_batches(
        pool, f'DELETE FROM "{schema}".dead_letters WHERE id IN ('
        f'SELECT id FROM "{schema}".dead_letters WHERE created_at < now() - '
        "make_interval(secs => $1) LIMIT $2)", limits.dead_letters_s, batch)
    return inbox, letters


async def purge_logged(pool: asyncpg.Pool, schema: str, limits: Horizon, batch: int) -> None:
    """One round of ``purge``, said in the log when it deleted anything: the job the consumer
    service repeats every ``interval_s`` (``shared.db.housekeeping.every``; a failed round is
    logged and tried again at the next, a table that grows for a while being no reason to stop
    consuming)."""
    inbox, letters = await purge(pool, schema, limits, batch)
    if inbox or letters:
        log.info("%s: purged %d inbox rows and %d dead letters", schema, inbox, letters)


async def _in_batches(pool: asyncpg.Pool, statement: str, age_s: float, batch: int) -> int:
    async def deleted(conn: asyncpg.Connection) -> int:
        return int((await conn.execute(statement, age_s, batch)).split()[-1])

    return await in_batches(pool, batch, deleted)
