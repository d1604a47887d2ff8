"""Composition root of the policy process: the consumer, the policy watcher, the expiry sweep."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial

import asyncpg

from services.policy.handlers import PolicyHandler
from services.policy.repository import SCHEMA, record_version
from services.policy.routes import ROUTES
from services.policy.settings import PolicySettings
from services.policy.outcomes import Destinations
from services.policy.sweep import sweep_forever
from shared.policy.watcher import PolicyWatcher
from shared.db.schemas import expect_migrated, migrate_service
from shared.config import Settings
from shared.identity.principals import PrincipalsWatcher
from shared.identity.records import decode_signed
from shared.identity import capability_keys
from shared.contracts.intake import PROPOSAL_ACCEPTED
from shared.messaging.consumer import IdempotentConsumer
from shared.messaging.consumer_service import ConsumerService, serve
from shared.messaging.routes import Router, in_stretches
from shared.signals import stop_on_signals
from shared.tools import load_registry
from shared.topology import (LEDGER_APPROVALS, LEDGER_COMPENSATIONS, LEDGER_INTAKE,
                             LEDGER_RESOLUTIONS)

log = logging.getLogger(__name__)


async def run_policy(settings: Settings, policy_settings: PolicySettings | None = None,
                     stopping: asyncio.Event | None = None) -> IdempotentConsumer:
    """Run until ``stopping`` is set; returns the consumer (its totals) for tests and the CLI."""
    policy_settings = policy_settings or PolicySettings()
    stopping = stopping or stop_on_signals()
    registry = load_registry(policy_settings.tools_file)  # a bad registry stops us here, loudly
    watcher = PolicyWatcher(policy_settings.policy_file, policy_settings.reload_interval_s)
    principals = PrincipalsWatcher(policy_settings.principals_file,  # a bad file stops us here
                                   policy_settings.principals_reload_interval_s)
    to = Destinations(policy_settings.authorizations_topic, policy_settings.results_family)
    handler = PolicyHandler(watcher, registry, capability_keys.signing_key(settings), to,
                            principals)
    routes = Router(ROUTES, {LEDGER_INTAKE: policy_settings.intake_topic,
                             LEDGER_APPROVALS: policy_settings.approvals_topic,
                             LEDGER_COMPENSATIONS: policy_settings.compensations_topic,
                             LEDGER_RESOLUTIONS: policy_settings.resolutions_topic}, handler)
    service = ConsumerService(
        name="policy", schema=SCHEMA, routes=routes,
        writes=(policy_settings.authorizations_topic,), crash_point="policy.after_commit",
        batch_size=policy_settings.batch_size, decoder=decode_signed, set_wise=True)

    async def prepare(pool: asyncpg.Pool) -> None:
        await migrate_service(pool, SCHEMA)
        await record_version(pool, watcher.current)  # before any decision names it

    @asynccontextmanager
    async def background(pool: asyncpg.Pool) -> AsyncIterator[list[asyncio.Task]]:
        """Reload (policy, principals) and sweep while consuming. Any of them failing for good
        stops the process (a service that silently stopped expiring requests, or ignored a
        revocation, would be worse than a restart)."""
        tasks = [asyncio.create_task(watcher.watch(partial(record_version, pool))),
                 asyncio.create_task(principals.watch()),
                 asyncio.create_task(sweep_forever(pool, to, policy_settings.sweep_interval_s))]
        for task in tasks:
            task.add_done_callback(lambda t: t.cancelled() or stopping.set())
        try:
            yield tasks
        finally:
            for task in tasks:
                task.cancel()
            failures = [outcome for outcome in await asyncio.gather(*tasks, return_exceptions=True)
                        if isinstance(outcome, Exception)]  # a cancellation is no failure
            if failures:
                log.error("policy background task failed: %r", failures[0])
                raise failures[0]

    return await serve(service, settings,
                       in_stretches(routes, {PROPOSAL_ACCEPTED: handler.decide_all}),
                       prepare=prepare,
                       migrated=lambda pool: expect_migrated(pool, SCHEMA), stopping=stopping,
                       alongside=background, shown=(policy_settings,))
