"""Composition root of the reference wallet process."""

from __future__ import annotations

import asyncio
import logging
import os

from faststream.kafka import KafkaBroker

from services.wallet.handlers import handle_effect_request
from services.registry import migrate_service
from services.wallet.repository import SCHEMA
from services.wallet.settings import WalletSettings
from shared import faults
from shared.config import Settings
from shared.db.pool import open_pool
from shared.messaging.admin import ensure_topics
from shared.messaging.consumer import IdempotentConsumer
from shared.messaging.subscription import subscribe
from shared.retry import dependency_backoff
from shared.signals import stop_on_signals

log = logging.getLogger(__name__)
APPLICATION_NAME = "intentledger-wallet"
GROUP_ID = "wallet"
STARTUP_PATIENCE_S = 120.0


async def run_wallet(settings: Settings, wallet_settings: WalletSettings | None = None,
                     stopping: asyncio.Event | None = None) -> IdempotentConsumer:
    """Run until ``stopping`` is set; returns the consumer (its totals) for tests and the CLI."""
    wallet_settings = wallet_settings or WalletSettings()
    stopping = stopping or stop_on_signals()
    if wallet_settings.faults:
        faults.configure(",".join(filter(None, (os.environ.get("INTENTLEDGER_FAULTS", ""),
                                                wallet_settings.faults))))
    endpoints = settings.endpoints
    async for attempt in dependency_backoff(give_up_after_s=STARTUP_PATIENCE_S, stopping=stopping):
        with attempt:
            pool = await open_pool(endpoints.database_url, application_name=APPLICATION_NAME)
    async for attempt in dependency_backoff(give_up_after_s=STARTUP_PATIENCE_S, stopping=stopping):
        with attempt:
            await migrate_service(pool, SCHEMA)
            await ensure_topics(endpoints.kafka_bootstrap,
                                [wallet_settings.request_topic, wallet_settings.reply_topic])
    consumer = IdempotentConsumer(GROUP_ID, SCHEMA, pool, handle_effect_request)
    broker = KafkaBroker(endpoints.kafka_bootstrap, logger=None)
    subscribe(broker, consumer, wallet_settings.request_topic, group_id=GROUP_ID,
              max_records=wallet_settings.batch_size, crash_point="wallet.after_commit")
    await broker.start()
    log.info("wallet started on %s", wallet_settings.request_topic)
    try:
        await stopping.wait()
    finally:
        await broker.stop()
        await pool.close()
        log.info("wallet stopped: %s", consumer.totals)
    return consumer
