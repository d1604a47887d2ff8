"""Composition root of the proposal-intake process."""

from __future__ import annotations

import asyncio

from services.proposal_intake.handlers import Intake, decode_raw
from services.proposal_intake.repository import SCHEMA
from services.proposal_intake.routes import ROUTES
from services.proposal_intake.settings import IntakeSettings
from shared.db.schemas import expect_migrated, migrate_service
from shared.config import Settings
from shared.messaging.consumer import IdempotentConsumer
from shared.messaging.consumer_service import ConsumerService, serve
from shared.messaging.routes import Router
from shared.signals import stop_on_signals
from shared.tools import load_registry
from shared.topology import AGENT_PROPOSALS


async def run_intake(settings: Settings, intake_settings: IntakeSettings | None = None,
                     stopping: asyncio.Event | None = None) -> IdempotentConsumer:
    """Run until ``stopping`` is set; returns the consumer (its totals) for tests and the CLI."""
    intake_settings = intake_settings or IntakeSettings()
    registry = load_registry(intake_settings.tools_file)  # a bad registry stops us here, loudly
    service = ConsumerService(
        name="proposal-intake", schema=SCHEMA,
        routes=Router(ROUTES, {AGENT_PROPOSALS: intake_settings.proposals_topic},
                      Intake(registry, intake_settings)),
        writes=(intake_settings.results_topic, intake_settings.intake_topic),
        crash_point="intake.after_commit", batch_size=intake_settings.batch_size,
        decoder=decode_raw)
    return await serve(service, settings,
                       prepare=lambda pool: migrate_service(pool, SCHEMA),
                       migrated=lambda pool: expect_migrated(pool, SCHEMA),
                       stopping=stopping or stop_on_signals(), shown=(intake_settings,))
