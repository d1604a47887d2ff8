"""The dispatcher's stack for a test, in its event loop: a relay, the reference wallet and a
dispatcher on a ``Stage`` (``tests/support/dispatch.py``), authorizations published as the
policy would, and what the dispatcher announced to agents."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from services.dispatcher.main import run_dispatcher
from services.dispatcher.metrics import DispatcherMetrics
from services.relay.main import run_relay
from services.relay.settings import RelaySettings
from shared.config import Settings
from shared.operator.publish import publish
from tests.support.dispatch import Stage, authorization, running_wallet_on


@asynccontextmanager
async def running(stage: Stage, *, wallet: dict | None = None,
                  counted: DispatcherMetrics | None = None,
                  **dispatcher_overrides) -> AsyncIterator[None]:
    """Relay, wallet and dispatcher in this event loop; faults via ``wallet={"faults": ...}``."""
    stopping = asyncio.Event()
    settings = Settings(kafka_bootstrap=stage.endpoints.kafka_bootstrap,
                        database_url=stage.endpoints.database_url)
    relay = asyncio.create_task(run_relay(settings, RelaySettings(
        schemas=["dispatcher", "wallet", "warehouse"], poll_interval_s=0.2), stopping))
    dispatcher = asyncio.create_task(run_dispatcher(
        settings, stage.dispatcher_settings(**dispatcher_overrides), stopping, counted))
    try:
        async with running_wallet_on(stage, **(wallet or {})):
            yield
    finally:
        stopping.set()
        await asyncio.gather(relay, dispatcher)


async def authorize(stage: Stage, *intents, version: str | None = None, **options) -> None:
    version = version or stage.write_policy()
    await publish(stage.endpoints.kafka_bootstrap, stage.authorizations,
                  *(authorization(intent, version, **options) for intent in intents))


async def announcements(pool, stage: Stage, logical_call_id: uuid.UUID,
                        tenant: str = "acme") -> list[dict]:
    """The ``ToolCallSettled`` envelopes the dispatcher wrote for one call to its tenant's
    results topic, in the order its outbox recorded them."""
    rows = await pool.fetch(
        "SELECT envelope FROM dispatcher.outbox WHERE topic = $1"
        " AND envelope->>'event_type' = 'ToolCallSettled'"
        " AND envelope->'payload'->>'logical_call_id' = $2 ORDER BY position",
        stage.results_topic(tenant), str(logical_call_id))
    return [json.loads(row["envelope"]) for row in rows]
