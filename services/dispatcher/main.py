"""Composition root of the dispatcher process: a consumer that records facts (authorizations,
receipts) and, alongside it on the same pool, the scheduler that takes every decision."""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta

import aiohttp
import asyncpg

from services.dispatcher import capacity
from services.dispatcher.adapters.http import HttpEffectAdapter
from services.dispatcher.audit import findings
from services.dispatcher.batch import Batch
from services.dispatcher.breaker import Breakers
from services.dispatcher.compensations import Proposer
from services.dispatcher.finishing import Finishing
from services.dispatcher.handlers import DispatcherInbox
from services.dispatcher.metrics import DispatcherMetrics
from services.dispatcher.policy_view import PolicyFile
from services.dispatcher.repository import NOTIFY_CHANNEL, SCHEMA, awaiting_review, unresolved
from services.dispatcher.routes import PRIORITY, ROUTES
from services.dispatcher.scheduler import Scheduler
from services.dispatcher.settings import DispatcherSettings
from services.dispatcher.steps import Stepper
from shared.policy.watcher import PolicyWatcher
from shared.identity.principals import PrincipalsWatcher
from shared.identity.records import decode_signed
from shared.db.housekeeping import every
from shared.db.schemas import expect_migrated, migrate_service
from shared import faults
from shared.identity import capability_keys
from shared.config import Settings
from shared.contracts.authorizations import AUTHORIZATION_ALLOWED
from shared.contracts.effect_requests import EFFECT_RECEIPT_ISSUED
from shared.db.wakeup import Wakeup
from shared.messaging.consumer import IdempotentConsumer
from shared.messaging.consumer_service import ConsumerService, serve
from shared.messaging.routes import Router, in_stretches
from shared.signals import stop_on_signals
from shared.tools import ToolRegistry, load_registry
from shared.topology import EFFECT_RECEIPTS, LEDGER_AUTHORIZATIONS, LEDGER_RESOLUTIONS

log = logging.getLogger(__name__)


async def run_dispatcher(settings: Settings, dispatcher_settings: DispatcherSettings | None = None,
                         stopping: asyncio.Event | None = None,
                         counted: DispatcherMetrics | None = None) -> IdempotentConsumer:
    """Run until ``stopping`` is set; returns the consumer (its totals) for tests and the CLI."""
    config = dispatcher_settings or DispatcherSettings()
    if config.faults:
        faults.configure(",".join(filter(None, (os.environ.get("INTENTLEDGER_FAULTS", ""),
                                                config.faults))))
    registry = load_registry(config.tools_file)  # a bad registry or policy stops us here, loudly
    policy = PolicyFile(PolicyWatcher(config.policy_file, config.policy_reload_interval_s), registry)
    breakers = Breakers(config.breaker_failures, timedelta(seconds=config.breaker_cooldown_s))
    stepper = Stepper(registry, policy, breakers, config, capability_keys.public_keys(settings),
                      _proposer(config, registry))
    batch = Batch(stepper, config)
    measured = counted if counted is not None else DispatcherMetrics()
    principals = PrincipalsWatcher(config.principals_file, config.principals_reload_interval_s)
    tool_topics = sorted({tool.topic for tool in registry.tools if tool.adapter == "kafka"})
    bounded = sorted({tool.name for tool in registry.tools if tool.max_in_flight is not None})
    names = {LEDGER_AUTHORIZATIONS: config.authorizations_topic,
             EFFECT_RECEIPTS: config.reply_topic, LEDGER_RESOLUTIONS: config.resolutions_topic}
    inbox = DispatcherInbox(stepper, breakers, config, principals,
                            Finishing(batch, stepper.tool_of, measured))
    routes = Router(ROUTES, names, inbox)
    service = ConsumerService(
        name="dispatcher", schema=SCHEMA, routes=routes,
        priority=tuple(names[topic] for topic in PRIORITY),
        writes=(config.dispatch_topic, config.effects_topic, config.compensations_topic,
                *tool_topics),
        crash_point="dispatcher.after_commit", batch_size=config.batch_size,
        decoder=decode_signed, set_wise=True)

    @asynccontextmanager
    async def scheduling(pool: asyncpg.Pool) -> AsyncIterator[list[asyncio.Task]]:
        """Without any of these tasks the dispatcher would consume and never dispatch: they
        are vital (liveness)."""
        halt = asyncio.Event()
        http = HttpEffectAdapter()
        wakeup = Wakeup(settings.endpoints.database_url, "intentledger-dispatcher-wakeup",
                        NOTIFY_CHANNEL)
        scheduler = Scheduler(pool, batch, breakers, http, config, measured)
        tasks = [asyncio.create_task(wakeup.run(halt)),
                 asyncio.create_task(scheduler.run(wakeup, halt)),
                 asyncio.create_task(_sample_backlog(pool, measured, halt, bounded)),
                 asyncio.create_task(policy.watcher.watch()),
                 asyncio.create_task(principals.watch())]
        try:
            async with auditing(pool) as audit_tasks:
                yield tasks + audit_tasks
        finally:
            halt.set()
            for watching in tasks[-2:]:
                watching.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await http.close()

    @asynccontextmanager
    async def auditing(pool: asyncpg.Pool) -> AsyncIterator[list[asyncio.Task]]:
        """The scheduled settled-call audit, if configured and any tool can be audited."""
        if config.audit_interval_s is None or not findings.audited_tools(registry):
            yield []
            return
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60)) as session:
            async with every(config.audit_interval_s, lambda: findings.audit_all(
                    pool, registry, config, session), "dispatcher: settled-call audit") as tasks:
                yield tasks

    async def prepare(pool: asyncpg.Pool) -> None:
        """Before the first record is consumed, once the process's metrics are configured."""
        measured.start_at_zero(sorted({tool.name for tool in registry.tools}))
        findings.start_at_zero(registry)
        await migrate_service(pool, SCHEMA)

    stretches = in_stretches(routes, {AUTHORIZATION_ALLOWED: inbox.authorized_all,
                                      EFFECT_RECEIPT_ISSUED: inbox.answered_all})
    return await serve(service, settings, stretches, prepare=prepare,
                       migrated=lambda pool: expect_migrated(pool, SCHEMA),
                       stopping=stopping or stop_on_signals(), alongside=scheduling,
                       shown=(config,))


def _proposer(config: DispatcherSettings, registry: ToolRegistry) -> Proposer | None:
    """Refuses to start a dispatcher that would have to compensate and could not."""
    key = config.key
    if key is None and any(tool.compensating_tool for tool in registry.tools):
        raise RuntimeError("the registry declares compensatable tools and the dispatcher has no "
                           "key to propose their compensations with: set "
                           "INTENTLEDGER_DISPATCHER_SIGNING_KEY_FILE (or _SIGNING_KEY), the "
                           f"private key of principal {config.principal_id!r} (role compensator)")
    return Proposer(config.principal_id, key) if key is not None else None


async def _sample_backlog(pool: asyncpg.Pool, measured: DispatcherMetrics,
                          halt: asyncio.Event, bounded: list[str], every_s: float = 5.0) -> None:
    """Refresh the backlog gauges (reconciliation, people, the bounded tools' lines); a failed
    sample keeps the last values."""
    while not halt.is_set():
        try:
            async with pool.acquire() as conn:
                measured.unresolved, measured.oldest_unresolved_s = await unresolved(conn)
                measured.awaiting_review = await awaiting_review(conn)
                if bounded:
                    measured.in_line = await capacity.in_line(conn, bounded)
        except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as error:
            log.warning("backlog sample failed: %s", error)
        try:
            await asyncio.wait_for(halt.wait(), every_s)
        except TimeoutError:
            pass
