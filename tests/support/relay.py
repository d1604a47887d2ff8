"""Running the relay inside the test's event loop, for tests that need no real crash."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from services.relay.main import run_relay
from services.relay.metrics import RelayMetrics
from services.relay.settings import RelaySettings
from shared.config import Endpoints, Settings


@asynccontextmanager
async def running_relay(endpoints: Endpoints, schema: str, **overrides) -> AsyncIterator[RelayMetrics]:
    stopping = asyncio.Event()
    metrics = RelayMetrics()
    settings = Settings(kafka_bootstrap=endpoints.kafka_bootstrap, database_url=endpoints.database_url)
    task = asyncio.create_task(
        run_relay(settings, RelaySettings(schemas=[schema], **overrides), stopping, metrics))
    try:
        yield metrics
    finally:
        stopping.set()
        await task
