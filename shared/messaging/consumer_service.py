"""The life of a consuming service: connect (patiently), prepare, consume until told to stop.

Every service that applies Kafka records follows the same start-up and shutdown: it may start
before PostgreSQL or Kafka answers (Kubernetes starts pods in any order), so connecting and
preparing retry with backoff, bounded and interruptible by SIGTERM; on stop whatever runs
``alongside`` stops first (an HTTP API finishes its requests in flight), then the broker (no new
batches), and the pool last.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager, nullcontext
from dataclasses import dataclass

import asyncpg
from faststream.kafka import KafkaBroker

from shared.config import Endpoints
from shared.db.pool import open_pool
from shared.messaging.admin import ensure_topics
from shared.messaging.consumer import (Accepts, Decoder, Handler, IdempotentConsumer,
                                      decode_envelope)
from shared.messaging.subscription import subscribe
from shared import tracing
from shared.retry import STARTUP_PATIENCE_S, dependency_backoff

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ConsumerService:
    name: str
    """Kebab-case service name: its consumer group and ``intentledger-<name>`` in pg_stat_activity."""
    schema: str
    consumes: str | tuple[str, ...]
    """The topic, or topics, it applies; one consumer group and one inbox for all of them."""
    topics: tuple[str, ...]
    """Every topic it reads or writes, created at start when missing."""
    crash_point: str
    batch_size: int = 500
    decoder: Decoder = decode_envelope
    accepts: Accepts | None = None
    """Per consumed topic, the event types it may carry; others are dead-lettered."""


async def serve(service: ConsumerService, endpoints: Endpoints, handler: Handler, *,
                prepare: Callable[[asyncpg.Pool], Awaitable[object]],
                stopping: asyncio.Event,
                alongside: Callable[[asyncpg.Pool], AbstractAsyncContextManager[object]] | None = None,
                ) -> IdempotentConsumer:
    """Run until ``stopping`` is set; returns the consumer (its totals) for tests and the CLI.

    ``alongside`` serves something else on the same pool while consuming (the wallet's HTTP
    API): entered once the broker is started, left before it stops."""
    tracing.install(service.name)
    async for attempt in dependency_backoff(give_up_after_s=STARTUP_PATIENCE_S, stopping=stopping):
        with attempt:
            pool = await open_pool(endpoints.database_url, application_name=f"intentledger-{service.name}")
    try:
        async for attempt in dependency_backoff(give_up_after_s=STARTUP_PATIENCE_S, stopping=stopping):
            with attempt:
                await prepare(pool)
                await ensure_topics(endpoints.kafka_bootstrap, list(service.topics))
        consumer = IdempotentConsumer(service.name, service.schema, pool, handler,
                                      decoder=service.decoder, accepts=service.accepts)
        broker = KafkaBroker(endpoints.kafka_bootstrap, logger=None)
        consumes = (service.consumes,) if isinstance(service.consumes, str) else service.consumes
        subscribe(broker, consumer, *consumes, group_id=service.name,
                  max_records=service.batch_size, crash_point=service.crash_point)
        await broker.start()
        try:
            async with alongside(pool) if alongside else nullcontext():
                log.info("%s started, consuming %s", service.name, ", ".join(consumes))
                await stopping.wait()
        finally:
            await broker.stop()
            log.info("%s stopped: %s", service.name, consumer.totals)
    finally:
        await pool.close()
    return consumer
