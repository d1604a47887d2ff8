"""Composition root of the proposal-intake process."""

from __future__ import annotations

import asyncio
import logging

from faststream.kafka import KafkaBroker

from services.proposal_intake.handlers import Intake, decode_raw
from services.proposal_intake.repository import SCHEMA
from services.proposal_intake.settings import IntakeSettings
from services.registry import migrate_service
from shared.config import Settings
from shared.db.pool import open_pool
from shared.messaging.admin import ensure_topics
from shared.messaging.consumer import IdempotentConsumer
from shared.messaging.subscription import subscribe
from shared.messaging.topics import AGENT_PROPOSALS, AGENT_RESULTS, LEDGER_INTAKE
from shared.retry import dependency_backoff
from shared.signals import stop_on_signals
from shared.tools import load_registry

log = logging.getLogger(__name__)
APPLICATION_NAME = "intentledger-proposal-intake"
GROUP_ID = "proposal-intake"
STARTUP_PATIENCE_S = 120.0


async def run_intake(settings: Settings, intake_settings: IntakeSettings | None = None,
                     stopping: asyncio.Event | None = None) -> IdempotentConsumer:
    """Run until ``stopping`` is set; returns the consumer (its totals) for tests and the CLI."""
    intake_settings = intake_settings or IntakeSettings()
    stopping = stopping or stop_on_signals()
    registry = load_registry(intake_settings.tools_file)  # a bad registry stops us here, loudly
    endpoints = settings.endpoints
    async for attempt in dependency_backoff(give_up_after_s=STARTUP_PATIENCE_S, stopping=stopping):
        with attempt:
            pool = await open_pool(endpoints.database_url, application_name=APPLICATION_NAME)
    async for attempt in dependency_backoff(give_up_after_s=STARTUP_PATIENCE_S, stopping=stopping):
        with attempt:
            await migrate_service(pool, SCHEMA)
            await ensure_topics(endpoints.kafka_bootstrap, [AGENT_PROPOSALS, AGENT_RESULTS, LEDGER_INTAKE])
    consumer = IdempotentConsumer(GROUP_ID, SCHEMA, pool, Intake(registry, intake_settings),
                                  decoder=decode_raw)
    broker = KafkaBroker(endpoints.kafka_bootstrap, logger=None)
    subscribe(broker, consumer, AGENT_PROPOSALS, group_id=GROUP_ID,
              max_records=intake_settings.batch_size, crash_point="intake.after_commit")
    await broker.start()
    log.info("proposal intake started with %d tools", len(registry.tools))
    try:
        await stopping.wait()
    finally:
        await broker.stop()
        await pool.close()
        log.info("proposal intake stopped: %s", consumer.totals)
    return consumer
