"""Composition root of the projection process: one consumer of every ledger topic."""

from __future__ import annotations

import asyncio

import asyncpg
from aiokafka import ConsumerRecord

from services.projection.facts import Delivery
from services.projection.handlers import apply_batch
from services.projection.health_sampler import sampling
from services.projection.repository import SCHEMA
from services.projection.routes import ROUTES
from services.projection.settings import ProjectionSettings
from shared.db.schemas import expect_migrated, migrate_service
from shared.config import Settings
from shared.messaging.consumer import IdempotentConsumer, decode_envelope
from shared.messaging.consumer_service import ConsumerService, serve
from shared.messaging.subscription import Gathering
from shared.messaging.routes import Router
from shared.signals import stop_on_signals
from shared.topology import LEDGER_AUTHORIZATIONS, LEDGER_DISPATCH, LEDGER_EFFECTS, LEDGER_INTAKE


def delivered(record: ConsumerRecord) -> Delivery:
    """The history records which topic each event came from."""
    return Delivery(record.topic, decode_envelope(record))


async def run_projection(settings: Settings, projection_settings: ProjectionSettings | None = None,
                         stopping: asyncio.Event | None = None) -> IdempotentConsumer:
    """Run until ``stopping`` is set; returns the consumer (its totals) for tests and the CLI."""
    config = projection_settings or ProjectionSettings()
    names = {LEDGER_INTAKE: config.intake_topic, LEDGER_AUTHORIZATIONS: config.authorizations_topic,
             LEDGER_DISPATCH: config.dispatch_topic, LEDGER_EFFECTS: config.effects_topic}
    service = ConsumerService(
        name="projection", schema=SCHEMA, routes=Router(ROUTES, names),
        writes=(), crash_point="projection.after_commit",
        batch_size=config.batch_size, decoder=delivered, set_wise=True,
        inbox=False,  # the history, keyed by event id and kept for ever, is the inbox
        gathering=Gathering(config.fetch_max_wait_ms, config.fetch_min_bytes))
    return await serve(service, settings, apply_batch,
                       prepare=_migrate, migrated=lambda pool: expect_migrated(pool, SCHEMA, "query"),
                       stopping=stopping or stop_on_signals(), shown=(config,),
                       alongside=_health_sampling(settings, config))


async def _migrate(pool: asyncpg.Pool) -> None:
    """Its own migrations, then the query's: those define who may read the projection's tables
    (row-level security), which only their owner may change; the query API applies none."""
    await migrate_service(pool, SCHEMA)
    await migrate_service(pool, "query")


def _health_sampling(settings: Settings, config: ProjectionSettings):
    if not config.health_sample_s:
        return None
    return lambda pool: sampling(pool, settings.endpoints.kafka_bootstrap, config.health_sample_s)
