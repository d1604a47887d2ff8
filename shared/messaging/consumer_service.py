"""The life of a consuming service: connect (patiently), prepare, consume until told to stop.

Every service that applies Kafka records follows the same start-up and shutdown: it may start
before PostgreSQL or Kafka answers (Kubernetes starts pods in any order), so connecting and
preparing retry with backoff, bounded and interruptible by SIGTERM; its health endpoints answer
from the first moment (alive; ready once PostgreSQL answers, its migrations are applied, Kafka
answers and the group gave it partitions). On stop whatever runs ``alongside`` stops first (an
HTTP API finishes its requests in flight), then the broker: it stops fetching, lets the batch in
flight finish and commit its offsets (up to ``SHUTDOWN_GRACE_S``), and closes; the pool last.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager, nullcontext
from dataclasses import dataclass

import asyncpg
from aiokafka import AIOKafkaConsumer
from aiokafka.errors import KafkaError
from faststream.kafka.subscriber.usecase import BatchSubscriber
from pydantic_settings import BaseSettings

from shared.config import Settings
from shared.db.pool import open_pool
from shared.health import Health, NotReady
from shared.messaging.admin import ensure_topics
from shared.messaging.consumer import (BatchHandler, Decoder, Handler, IdempotentConsumer,
                                       decode_envelope)
from shared.messaging.kafka_security import configured, new_broker
from shared.db.housekeeping import every
from shared.messaging.retention import (Horizon, RetentionSettings, RetentionUnknown, horizon,
                                        purge_logged, topic_retention_s)
from shared.messaging.routes import Router
from shared.messaging.subscription import Gathering, subscribe
from shared.topology import priority_group
from shared.retry import STARTUP_PATIENCE_S, dependency_backoff
from shared.runtime import service_runtime

log = logging.getLogger(__name__)
SHUTDOWN_GRACE_S = 15.0
"""After SIGTERM, how long the batch in flight may take to finish and commit. Within the 30 s the
orchestrators wait before SIGKILL (compose ``stop_grace_period``, Kubernetes
``terminationGracePeriodSeconds``); a batch still running then is cancelled, its transaction
rolls back and it is delivered again after the restart (and applied once: the inbox)."""
READINESS = ("postgres", "migrations", "kafka", "partitions")


@dataclass(frozen=True)
class ConsumerService:
    name: str
    """Kebab-case service name: its consumer group and ``intentledger-<name>`` in pg_stat_activity."""
    schema: str
    routes: Router
    """Its routing table: the topics it applies (one inbox for all of them) and the event
    types each may carry; others are dead-lettered."""
    writes: tuple[str, ...]
    """The fixed topics its outbox names; they and the consumed ones are created at start when
    missing (a tenant's results topic is created by the relay when it is first written)."""
    crash_point: str
    batch_size: int = 500
    decoder: Decoder = decode_envelope
    set_wise: bool = False
    """The handler applies a batch's fresh events in one call (a ``BatchHandler``)."""
    inbox: bool = True
    """False: the set-wise handler deduplicates by itself (``IdempotentConsumer``)."""
    priority: tuple[str, ...] = ()
    """Consumed topics read by a subscriber of their own, in consumer group
    ``priority_group(name)`` (same inbox), so that their records never wait behind a backlog
    of the others': the dispatcher's receipts finish calls already sent, and must be recorded
    before their attempt deadlines however many new authorizations are queued. A group of its
    own, not a second member of the service's group: two members joining one group cost every
    start-up a rebalance (3 s, a heartbeat interval, before anything is consumed)."""
    gathering: Gathering = Gathering()
    """How long its fetches may wait for more records (``subscription.Gathering``)."""


async def serve(service: ConsumerService, settings: Settings,
                handler: Handler | BatchHandler | None = None, *,
                prepare: Callable[[asyncpg.Pool], Awaitable[object]],
                migrated: Callable[[asyncpg.Pool], Awaitable[object]],
                stopping: asyncio.Event,
                alongside: Callable[[asyncpg.Pool], AbstractAsyncContextManager[object]] | None = None,
                shown: tuple[BaseSettings, ...] = ()) -> IdempotentConsumer:
    """Run until ``stopping`` is set; returns the consumer (its totals) for tests and the CLI.

    ``migrated`` raises unless the service's schema is at the version this code expects
    (readiness). ``alongside`` serves something else on the same pool while consuming (the
    wallet's HTTP API, the dispatcher's scheduler): entered once the broker is started, left
    before it stops; what it yields, if anything, are tasks the process is not alive without.
    ``handler`` applies the admitted events; by default the routing table does, event by
    event. ``shown``: the service's settings, for the configuration line."""
    health = Health(service.name, *READINESS)
    consumes = service.routes.topics
    retention = RetentionSettings()
    async with service_runtime(health, settings, *shown, configured()):
        endpoints = settings.endpoints
        async for attempt in dependency_backoff(give_up_after_s=STARTUP_PATIENCE_S, stopping=stopping):
            with attempt:
                pool = await open_pool(endpoints.database_url,
                                       application_name=f"intentledger-{service.name}")
        health.ready_when("postgres", lambda: pool.fetchval("SELECT 1"))
        try:
            async for attempt in dependency_backoff(give_up_after_s=STARTUP_PATIENCE_S,
                                                    stopping=stopping):
                with attempt:
                    await prepare(pool)
                    await ensure_topics(endpoints.kafka_bootstrap,
                                        list(dict.fromkeys((*consumes, *service.writes))))
                    kept = await _kept(endpoints.kafka_bootstrap, consumes, retention)
            health.ready_when("migrations", lambda: migrated(pool))
            consumer = IdempotentConsumer(service.name, service.schema, pool,
                                          handler or service.routes, decoder=service.decoder,
                                          accepts=service.routes.accepts,
                                          set_wise=service.set_wise, inbox=service.inbox)
            broker = new_broker(endpoints.kafka_bootstrap, logger=None,
                                graceful_timeout=SHUTDOWN_GRACE_S)
            lanes = {service.name: [t for t in consumes if t not in service.priority],
                     priority_group(service.name): [t for t in consumes if t in service.priority]}
            subscribers = [subscribe(broker, consumer, *topics, group_id=group,
                                     max_records=service.batch_size,
                                     crash_point=service.crash_point,
                                     gathering=service.gathering)
                           for group, topics in lanes.items() if topics]
            await broker.start()
            _watch(health, subscribers)
            purging = every(retention.interval_s, lambda: purge_logged(
                pool, service.schema, kept, retention.batch), f"{service.schema}: purge")
            try:
                async with purging, alongside(pool) if alongside else nullcontext() as vital:
                    if vital:
                        health.vital("background", lambda: vital)
                    log.info("%s started, consuming %s", service.name, ", ".join(consumes))
                    await stopping.wait()
                    log.info("%s stopping: finishing the batch in flight", service.name)
            finally:
                await broker.stop()
                log.info("%s stopped: %s", service.name, consumer.totals)
        finally:
            await pool.close()
    return consumer


async def _kept(bootstrap: str, consumes: list[str], settings: RetentionSettings) -> Horizon:
    """How long the inbox and the dead letters are kept (``shared.messaging.retention``); if
    the broker will not say how long it keeps the consumed topics, the inbox is kept for ever."""
    try:
        return horizon(settings, await topic_retention_s(bootstrap, list(consumes)))
    except (KafkaError, RetentionUnknown) as error:
        log.warning("the topics' retention is unknown (%s): the inbox is not purged", error)
        return Horizon(None, settings.dead_letters_s)


def _watch(health: Health, subscribers: list[BatchSubscriber]) -> None:
    """Kafka answers through the consumers' own connections (and credentials); partitions are
    what make a replica useful (more replicas than partitions leaves some idle, not ready)."""

    async def kafka() -> None:
        for subscriber in subscribers:
            await _started(subscriber).topics()  # a metadata request

    async def partitions() -> None:
        if not any(_started(subscriber).assignment() for subscriber in subscribers):
            raise NotReady("no partitions assigned (joining the group, or more replicas than "
                           "partitions)")

    health.ready_when("kafka", kafka)
    health.ready_when("partitions", partitions)
    health.vital("consumer", lambda: [task for subscriber in subscribers
                                      for task in subscriber.tasks])


def _started(subscriber: BatchSubscriber) -> AIOKafkaConsumer:
    if subscriber.consumer is None:
        raise NotReady("consumer stopped")
    return subscriber.consumer
