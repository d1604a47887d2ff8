"""The intake's SQL: runs and intents (the idempotency records) in schema proposal_intake."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime

import asyncpg

from shared.contracts.intake import Intent
from shared.runs import RunKey

SCHEMA = "proposal_intake"


@dataclass(frozen=True)
class RunLimits:
    deadline_at: datetime
    max_calls: int
    max_attempts: int
    cost_limit_minor: int | None
    currency: str | None


async def run_for_update(conn: asyncpg.Connection, run: RunKey) -> asyncpg.Record | None:
    """Lock the run so its calls are taken one at a time (budgets count correctly)."""
    return await conn.fetchrow(f"SELECT * FROM {SCHEMA}.runs WHERE tenant_id = $1 AND run_id = $2"
                               " FOR UPDATE", run.tenant_id, run.run_id)


async def create_run(conn: asyncpg.Connection, proposal, limits: RunLimits) -> asyncpg.Record:
    """Called only on the way to an accepted call; a concurrent first call may win the insert,
    in which case its row is returned (locked) and checked like any existing run."""
    await conn.execute(
        f"INSERT INTO {SCHEMA}.runs (run_id, tenant_id, principal_id, deadline_at, max_calls, "
        "max_attempts, cost_limit_minor, currency) VALUES ($1, $2, $3, $4, $5, $6, $7, $8) "
        "ON CONFLICT (tenant_id, run_id) DO NOTHING",
        proposal.run_id, proposal.tenant_id, proposal.principal_id, limits.deadline_at,
        limits.max_calls, limits.max_attempts, limits.cost_limit_minor, limits.currency)
    return await run_for_update(conn, RunKey.of(proposal))


async def call_by_operation_key(conn: asyncpg.Connection, key: str) -> asyncpg.Record | None:
    return await conn.fetchrow(
        f"SELECT logical_call_id, arguments_hash, state, run_id FROM {SCHEMA}.logical_calls "
        "WHERE operation_key = $1", key)


async def insert_intent(conn: asyncpg.Connection, intent: Intent, cost_minor: int) -> bool:
    """False when the operation key or (tenant, run, provider call id) is already taken."""
    inserted = await conn.fetchval(
        f"INSERT INTO {SCHEMA}.logical_calls (logical_call_id, operation_key, run_id, provider, "
        "provider_call_id, tool_name, tool_version, arguments_hash, canonical_arguments, "
        "principal_id, tenant_id, state, version) "
        "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9::jsonb, $10, $11, 'VALIDATED', 1) "
        "ON CONFLICT DO NOTHING RETURNING logical_call_id",
        intent.logical_call_id, intent.operation_key, intent.run_id, intent.provider,
        intent.provider_call_id, intent.tool_name, intent.tool_version, intent.arguments_hash,
        json.dumps(intent.canonical_arguments), intent.principal_id, intent.tenant_id)
    if inserted:
        await conn.execute(f"UPDATE {SCHEMA}.runs SET call_count = call_count + 1, "
                           "cost_spent_minor = cost_spent_minor + $3 WHERE tenant_id = $1 AND run_id = $2",
                           intent.tenant_id, intent.run_id, cost_minor)
    return inserted is not None
