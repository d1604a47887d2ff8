"""Composition root of the proposal-intake process."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import asyncpg

from services.proposal_intake import expiry
from services.proposal_intake.handlers import Intake, decode_raw
from services.proposal_intake.repository import SCHEMA
from services.proposal_intake.routes import ROUTES
from services.proposal_intake.settings import IntakeSettings
from shared.db.housekeeping import every
from shared.db.schemas import expect_migrated, migrate_service
from shared.config import Settings
from shared.identity.principals import PrincipalsWatcher
from shared.messaging.consumer import IdempotentConsumer
from shared.messaging.consumer_service import ConsumerService, serve
from shared.messaging.routes import Router
from shared.signals import stop_on_signals
from shared.tools import load_registry
from shared.topology import AGENT_PROPOSALS

log = logging.getLogger(__name__)


async def run_intake(settings: Settings, intake_settings: IntakeSettings | None = None,
                     stopping: asyncio.Event | None = None) -> IdempotentConsumer:
    """Run until ``stopping`` is set; returns the consumer (its totals) for tests and the CLI."""
    intake_settings = intake_settings or IntakeSettings()
    stopping = stopping or stop_on_signals()
    registry = load_registry(intake_settings.tools_file)  # a bad registry stops us here, loudly
    principals = PrincipalsWatcher(intake_settings.principals_file,  # so does a bad principals file
                                   intake_settings.principals_reload_interval_s)
    if intake_settings.unsigned_tenants:
        log.warning("DEVELOPMENT ONLY: unsigned proposals are accepted for tenants %s; anyone who "
                    "can write %s can act as any of their principals",
                    ", ".join(sorted(intake_settings.unsigned_tenants)),
                    intake_settings.proposals_topic)
    intake = Intake(registry, intake_settings, principals)
    service = ConsumerService(
        name="proposal-intake", schema=SCHEMA,
        routes=Router(ROUTES, {AGENT_PROPOSALS: intake_settings.proposals_topic}, intake),
        writes=(intake_settings.intake_topic,),
        crash_point="intake.after_commit", batch_size=intake_settings.batch_size,
        decoder=decode_raw, set_wise=True)

    retention = expiry.retention_by_tool(registry)

    @asynccontextmanager
    async def alongside(pool: asyncpg.Pool) -> AsyncIterator[list[asyncio.Task]]:
        """A new key or a revocation takes effect without a restart; a watcher that failed for
        good stops the process (a revocation must never be silently ignored). Intents past
        their tool's retention expire meanwhile, if any tool declares one."""
        task = asyncio.create_task(principals.watch())
        task.add_done_callback(lambda t: t.cancelled() or stopping.set())
        try:
            if not retention:
                yield [task]
                return
            expiry.start_at_zero(retention)
            async with every(intake_settings.key_expiry_interval_s,
                             lambda: expiry.expire_all(pool, retention,
                                                       intake_settings.key_expiry_batch),
                             "intake: expiring operation keys") as expiring:
                yield [task, *expiring]
        finally:
            task.cancel()

    return await serve(service, settings, intake.take_all,
                       prepare=lambda pool: migrate_service(pool, SCHEMA),
                       migrated=lambda pool: expect_migrated(pool, SCHEMA),
                       stopping=stopping, alongside=alongside, shown=(intake_settings,))
