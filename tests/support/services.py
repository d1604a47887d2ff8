"""Running a consuming service and a relay for its outbox inside the test's event loop."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

from shared.config import Endpoints, Settings
from shared.messaging.consumer import BatchReport, IdempotentConsumer
from tests.support.relay import running_relay

Start = Callable[[Settings, asyncio.Event], Awaitable[IdempotentConsumer]]


class ServiceRun:
    """Filled in when the service stops: its consumer's committed totals."""

    totals: BatchReport | None = None


@asynccontextmanager
async def running_service(endpoints: Endpoints, schema: str, start: Start,
                          run: ServiceRun | None = None) -> AsyncIterator[ServiceRun]:
    run = run or ServiceRun()
    stopping = asyncio.Event()
    settings = Settings(kafka_bootstrap=endpoints.kafka_bootstrap, database_url=endpoints.database_url)
    task = asyncio.create_task(start(settings, stopping))
    try:
        async with running_relay(endpoints, schema, poll_interval_s=0.2):
            yield run
    finally:
        stopping.set()
        run.totals = (await task).totals
