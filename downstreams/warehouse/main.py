"""Composition root of the reference warehouse process."""

from __future__ import annotations

import asyncio
import os

from shared.db.schemas import expect_migrated, migrate_service
from downstreams.warehouse.handlers import WarehouseInbox
from downstreams.warehouse.repository import SCHEMA
from downstreams.warehouse.routes import ROUTES
from downstreams.warehouse.settings import WarehouseSettings
from shared import faults
from shared.config import Settings
from shared.downstream.capability_check import CapabilityCheck
from shared.identity import capability_keys
from shared.messaging.consumer import IdempotentConsumer
from shared.messaging.consumer_service import ConsumerService, serve
from shared.messaging.routes import Router
from shared.signals import stop_on_signals
from shared.topology import EFFECTS_WAREHOUSE


async def run_warehouse(settings: Settings, warehouse_settings: WarehouseSettings | None = None,
                        stopping: asyncio.Event | None = None) -> IdempotentConsumer:
    """Run until ``stopping`` is set; returns the consumer (its totals) for tests and the CLI."""
    warehouse_settings = warehouse_settings or WarehouseSettings()
    if warehouse_settings.faults:
        faults.configure(",".join(filter(None, (os.environ.get("INTENTLEDGER_FAULTS", ""),
                                                warehouse_settings.faults))))
    service = ConsumerService(
        name="warehouse", schema=SCHEMA,
        routes=Router(ROUTES, {EFFECTS_WAREHOUSE: warehouse_settings.request_topic}),
        writes=(warehouse_settings.reply_topic,),
        crash_point="warehouse.after_commit", batch_size=warehouse_settings.batch_size,
        set_wise=True)
    inbox = WarehouseInbox(CapabilityCheck(capability_keys.public_keys(settings)))
    return await serve(service, settings, inbox.answer_all,
                       prepare=lambda pool: migrate_service(pool, SCHEMA),
                       migrated=lambda pool: expect_migrated(pool, SCHEMA),
                       stopping=stopping or stop_on_signals(), shown=(warehouse_settings,))
