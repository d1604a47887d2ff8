"""The whole pipeline in the test's process on real Kafka and PostgreSQL: intake, policy,
dispatcher, the projection and one relay for their outboxes, on one test's topics, with the
wallet as the downstream (and the warehouse, for a test that runs it: the relay carries its
receipts). Used by the projection pipeline's tests and the console's browser
tests (the projection's schema is shared by tests: every assertion is about a test's run)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from services.dispatcher.main import run_dispatcher
from services.policy.main import run_policy
from services.projection.main import run_projection
from services.projection.settings import ProjectionSettings
from services.proposal_intake.main import run_intake
from shared.db.schemas import migrate_service
from services.relay.main import run_relay
from services.relay.settings import RelaySettings
from shared.config import Settings
from tests.support.dispatch import Stage, park_other_tests_calls, running_wallet_on
from tests.support.kafka import wait_for

SCHEMAS = ("proposal_intake", "policy", "dispatcher", "wallet", "warehouse", "projection")
POLICY = {"capability_ttl_seconds": 120, "rules": [
    {"name": "debits", "principals": ["agent-*"], "tenants": ["acme"], "tools": ["wallet.debit"],
     "resource_path": "wallet_id", "resources": ["tenant/acme/*"], "effect": "allow"}]}
RESOLUTIONS = [{"name": "ops", "operators": ["operator:*"], "tenants": ["acme"], "tools": ["wallet.*"]}]
"""Who may settle a call by hand: the policy's ``resolutions`` (never the call's own principal)."""


async def pipeline_stage(pool, endpoints, folder) -> Stage:
    """Migrated schemas, this test's topics, the example registry and an allow-debits policy."""
    for schema in SCHEMAS:
        await migrate_service(pool, schema)
    stage = Stage(folder, endpoints)
    stage.write_registry()
    stage.write_policy(POLICY)
    await stage.create_topics(pipeline=True)
    await park_other_tests_calls(pool)
    return stage


@asynccontextmanager
async def pipeline(stage: Stage, *, wallet: dict | None = None) -> AsyncIterator[None]:
    """Intake, policy, dispatcher, wallet, the projection and one relay for their outboxes."""
    stopping = asyncio.Event()
    settings = Settings(kafka_bootstrap=stage.endpoints.kafka_bootstrap,
                        database_url=stage.endpoints.database_url)
    projection = ProjectionSettings(intake_topic=stage.intake,
                                    authorizations_topic=stage.authorizations,
                                    dispatch_topic=stage.dispatch, effects_topic=stage.effects)
    services = [
        run_relay(settings, RelaySettings(schemas=list(SCHEMAS), poll_interval_s=0.2), stopping),
        run_intake(settings, stage.intake_settings(), stopping),
        run_policy(settings, stage.policy_settings(), stopping),
        run_dispatcher(settings, stage.dispatcher_settings(), stopping),
        run_projection(settings, projection, stopping)]
    tasks = [asyncio.create_task(service) for service in services]
    try:
        async with running_wallet_on(stage, **(wallet or {})):
            yield
    finally:
        stopping.set()
        await asyncio.gather(*tasks)


async def projected(pool, table: str, column: str, value, *, where: str = "") -> dict | None:
    async def found():
        return await pool.fetchrow(f"SELECT * FROM projection.{table} WHERE {column} = $1{where}",
                                   value)
    row = await wait_for(found, timeout=90)
    return dict(row) if row else None
