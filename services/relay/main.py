"""Composition root of the relay process: pools, producer, wake-ups and workers; ready once
PostgreSQL answers, the outboxes it drains are migrated and Kafka answers its producer."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

import asyncpg

from shared.db.schemas import expect_migrated
from services.relay.metrics import RelayMetrics
from services.relay.publisher import ProducerHandle, new_producer
from services.relay.relay import Relay
from services.relay.settings import RelaySettings
from services.relay.topics import TopicCreator
from shared.config import Endpoints, Settings
from shared.db.pool import open_pool
from shared.db.wakeup import Wakeup
from shared.errors import is_retryable
from shared.health import Health, NotReady
from shared.messaging.kafka_security import configured
from shared.messaging.outbox import outbox_schemas
from shared.retry import STARTUP_PATIENCE_S, dependency_backoff
from shared.runtime import service_runtime
from shared.signals import stop_on_signals

OUTBOX_CHANNEL = "intentledger_outbox"
"""NOTIFY'd by the outbox insert trigger (shared/db/migrations/messaging), with the outbox's
schema as payload: a notification queues that outbox directly, and the scan of every outbox
runs only on the poll interval and after the LISTEN connection (re)connects."""

log = logging.getLogger(__name__)
APPLICATION_NAME = "intentledger-relay"


async def run_relay(settings: Settings, relay_settings: RelaySettings | None = None,
                    stopping: asyncio.Event | None = None,
                    metrics: RelayMetrics | None = None) -> None:
    """Run until ``stopping`` is set (SIGTERM/SIGINT set it when run from the CLI)."""
    relay_settings = relay_settings or RelaySettings()
    health = Health("relay", "postgres", "migrations", "kafka")
    async with service_runtime(health, settings, relay_settings, configured()):
        await _relay(settings.endpoints, relay_settings, stopping or stop_on_signals(), metrics,
                     health)


async def _relay(endpoints: Endpoints, relay_settings: RelaySettings, stopping: asyncio.Event,
                 metrics: RelayMetrics | None, health: Health) -> None:
    producers = ProducerHandle(
        lambda: new_producer(endpoints.kafka_bootstrap, relay_settings.max_message_bytes))
    # In a cluster the relay may start before Kafka or PostgreSQL answers: wait, bounded.
    async for attempt in dependency_backoff(give_up_after_s=STARTUP_PATIENCE_S, stopping=stopping):
        with attempt:
            pool = await open_pool(endpoints.database_url, application_name=APPLICATION_NAME,
                                   max_size=relay_settings.workers + 2)
    health.ready_when("postgres", lambda: pool.fetchval("SELECT 1"))
    health.ready_when("migrations", lambda: _outboxes_migrated(pool, relay_settings))
    async for attempt in dependency_backoff(give_up_after_s=STARTUP_PATIENCE_S, stopping=stopping):
        with attempt:
            await producers.start()
    health.ready_when("kafka", lambda: producers.current.client.fetch_all_metadata())
    relay = Relay(pool, producers, relay_settings, metrics, TopicCreator(
        endpoints.kafka_bootstrap, relay_settings.creates_topics_prefix,
        relay_settings.created_topic_replicas))

    def notified(schema: str) -> None:
        if not relay.notified(schema) and relay_settings.schemas is None:
            wakeup.wake()  # an outbox this relay has not discovered yet: rescan

    wakeup = Wakeup(endpoints.database_url, APPLICATION_NAME, OUTBOX_CHANNEL, notified)
    log.info("relay %s started with %d workers", relay_settings.worker_id, relay_settings.workers)
    tasks = [asyncio.create_task(wakeup.run(stopping)),
             asyncio.create_task(_scanner(relay, wakeup, relay_settings, stopping)),
             asyncio.create_task(_every(relay_settings.retention_interval_s, relay.purge_published,
                                        stopping)),
             asyncio.create_task(_every(5.0, relay.refresh_backlog, stopping)),
             *(asyncio.create_task(relay.worker(stopping)) for _ in range(relay_settings.workers))]
    health.vital("workers", lambda: tasks)
    try:
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
        for task in done:
            task.result()  # a worker that died of a permanent error stops the relay loudly
    finally:
        stopping.set()
        _, unfinished = await asyncio.wait(tasks, timeout=relay_settings.shutdown_grace_s)
        for task in unfinished:
            task.cancel()  # a cancelled batch rolls back: its rows stay pending
        await asyncio.gather(*tasks, return_exceptions=True)
        try:
            await asyncio.wait_for(producers.stop(), relay_settings.shutdown_grace_s)
        except TimeoutError:
            log.warning("producer did not flush within the grace period (broker unreachable?)")
        await pool.close()
        log.info("relay stopped after publishing %d events (%d parked)",
                 relay.metrics.published, relay.metrics.parked)


async def _outboxes_migrated(pool: asyncpg.Pool, settings: RelaySettings) -> None:
    """Every outbox it drains has the messaging tables this release reads."""
    async with pool.acquire() as conn:
        schemas = settings.schemas or await outbox_schemas(conn)
    if not schemas:
        raise NotReady("no outbox to drain: run `intentledger migrate`")
    await expect_migrated(pool, *schemas, messaging_only=True)


async def _scanner(relay: Relay, wakeup: Wakeup, settings: RelaySettings,
                   stopping: asyncio.Event) -> None:
    while not stopping.is_set():
        try:
            await relay.scan()
        except Exception as error:
            if not is_retryable(error):
                raise
            log.warning("scan failed: %s", error)
        await wakeup.wait(settings.poll_interval_s)


async def _every(seconds: float, job: Callable[[], Awaitable[object]],
                 stopping: asyncio.Event) -> None:
    while not stopping.is_set():
        try:
            await job()
        except Exception as error:
            if not is_retryable(error):
                raise
            log.warning("%s failed: %s", getattr(job, "__name__", job), error)
        try:
            await asyncio.wait_for(stopping.wait(), seconds)
        except TimeoutError:
            pass
