"""Housekeeping a service does on its own tables while it runs (keys forgotten, records
expired): a job in bounded batches, one transaction each, repeated every so often. A failed
round is logged and tried again at the next: a table that grows for a while is no reason to
stop the service, and the task itself never ends, so its health stays "ok"."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import asyncpg

log = logging.getLogger(__name__)


async def in_batches(pool: asyncpg.Pool, batch: int,
                     step: Callable[[asyncpg.Connection], Awaitable[int]]) -> int:
    """Run ``step`` (which handles at most ``batch`` rows and says how many) until a batch
    comes back short; how many in all."""
    done = 0
    while True:
        async with pool.acquire() as conn:
            count = await step(conn)
        done += count
        if count < batch:
            return done


@asynccontextmanager
async def every(interval_s: float, job: Callable[[], Awaitable[object]],
                name: str) -> AsyncIterator[list[asyncio.Task]]:
    """Run ``job`` now and then every ``interval_s`` while inside; yields the task (vital)."""
    task = asyncio.create_task(_forever(interval_s, job, name), name=name)
    try:
        yield [task]
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def _forever(interval_s: float, job: Callable[[], Awaitable[object]], name: str) -> None:
    while True:
        try:
            await job()
        except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as error:
            log.warning("%s failed, tried again in %.0f s: %s", name, interval_s, error)
        await asyncio.sleep(interval_s)
