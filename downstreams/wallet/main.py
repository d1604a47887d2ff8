"""Composition root of the reference wallet process: the Kafka effect adapter always, the HTTP
API as well when ``INTENTLEDGER_WALLET_HTTP_PORT`` is set; both on one pool."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager

import asyncpg

from shared.db.housekeeping import every
from shared.db.schemas import expect_migrated, migrate_service
from downstreams.wallet.forgetting import forget_all
from downstreams.wallet.handlers import WalletInbox
from downstreams.wallet.http_api import serving
from downstreams.wallet.repository import SCHEMA
from downstreams.wallet.routes import ROUTES
from downstreams.wallet.settings import WalletSettings
from shared import faults
from shared.config import Settings
from shared.downstream.capability_check import CapabilityCheck
from shared.identity import capability_keys
from shared.messaging.consumer import IdempotentConsumer
from shared.messaging.consumer_service import ConsumerService, serve
from shared.messaging.routes import Router
from shared.signals import stop_on_signals
from shared.topology import EFFECTS_WALLET


async def run_wallet(settings: Settings, wallet_settings: WalletSettings | None = None,
                     stopping: asyncio.Event | None = None) -> IdempotentConsumer:
    """Run until ``stopping`` is set; returns the consumer (its totals) for tests and the CLI."""
    wallet_settings = wallet_settings or WalletSettings()
    if wallet_settings.faults:
        faults.configure(",".join(filter(None, (os.environ.get("INTENTLEDGER_FAULTS", ""),
                                                wallet_settings.faults))))
    check = CapabilityCheck(capability_keys.public_keys(settings))
    service = ConsumerService(
        name="wallet", schema=SCHEMA,
        routes=Router(ROUTES, {EFFECTS_WALLET: wallet_settings.request_topic}),
        writes=(wallet_settings.reply_topic,),
        crash_point="wallet.after_commit", batch_size=wallet_settings.batch_size, set_wise=True)

    @asynccontextmanager
    async def alongside(pool: asyncpg.Pool) -> AsyncIterator[list[asyncio.Task]]:
        """The HTTP API and the forgetting of keys, each if configured."""
        async with AsyncExitStack() as stack:
            vital: list[asyncio.Task] = []
            if wallet_settings.http_port is not None:
                await stack.enter_async_context(serving(
                    pool, check, wallet_settings.http_host, wallet_settings.http_port))
            if (retention_s := wallet_settings.key_retention_s) is not None:
                vital += await stack.enter_async_context(every(
                    wallet_settings.forget_every_s, lambda: forget_all(pool, retention_s),
                    "wallet: forgetting keys"))
            yield vital

    return await serve(service, settings, WalletInbox(check).answer_all,
                       prepare=lambda pool: migrate_service(pool, SCHEMA),
                       migrated=lambda pool: expect_migrated(pool, SCHEMA),
                       stopping=stopping or stop_on_signals(), alongside=alongside,
                       shown=(wallet_settings,))
