"""A database migrated before runs were named by tenant keeps its runs, under the pair.

Each service's migrations up to the one that re-keys its runs are applied to a scratch schema,
rows are written in the old shape, then the rest of the plan runs: the rows must survive, be
found by (tenant, run id), and a second tenant must now be able to have a run of the same id.
"""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import asyncpg
import pytest

from shared.db.migrations import migrate, plan_for
from shared.ids import new_event_id

pytestmark = pytest.mark.infra
SERVICES = Path(__file__).parents[2] / "services"
LATER = datetime.now(UTC) + timedelta(hours=1)


async def _upgraded(conn: asyncpg.Connection, service: str, new: str, old_rows: str) -> str:
    """A scratch schema at the migration before ``new``, with ``old_rows`` written, then
    migrated to the end of the plan."""
    schema = f"upgrade_{service}_{uuid.uuid4().hex[:8]}"
    plan = plan_for(SERVICES / service / "migrations")
    cut = next(index for index, m in enumerate(plan) if m.version == f"service/{new}")
    await migrate(conn, schema, plan[:cut])
    async with conn.transaction():
        await conn.execute(f'SET LOCAL search_path TO "{schema}"')
        await conn.execute(old_rows)
    assert await migrate(conn, schema, plan) == [m.version for m in plan[cut:]]
    await conn.execute(f'SET search_path TO "{schema}"')
    return schema


@pytest.fixture
async def conn(pool):
    async with pool.acquire() as conn:
        yield conn
        await conn.execute("RESET search_path")
        for schema in await conn.fetch("SELECT nspname FROM pg_namespace WHERE nspname LIKE"
                                       " 'upgrade\\_%'"):
            await conn.execute(f'DROP SCHEMA "{schema["nspname"]}" CASCADE')


async def test_the_intakes_runs_and_calls_survive_under_the_pair(conn):
    call_id = uuid.uuid4()
    await _upgraded(conn, "proposal_intake", "0004_runs_by_tenant", f"""
        INSERT INTO runs (run_id, tenant_id, principal_id, deadline_at, max_calls, max_attempts,
                          call_count, cost_spent_minor)
            VALUES ('run-1', 'acme', 'agent-7', '{LATER.isoformat()}', 8, 16, 1, 4000);
        INSERT INTO logical_calls (logical_call_id, operation_key, run_id, provider,
            provider_call_id, tool_name, tool_version, arguments_hash, canonical_arguments,
            principal_id, tenant_id, state, version)
            VALUES ('{call_id}', 'acme:k', 'run-1', 'generic', 'call-1', 'wallet.debit', '1',
                    'sha256:ab', '{{}}', 'agent-7', 'acme', 'VALIDATED', 1)""")
    run = await conn.fetchrow("SELECT * FROM runs WHERE tenant_id = 'acme' AND run_id = 'run-1'")
    assert (run["call_count"], run["cost_spent_minor"], run["max_calls"]) == (1, 4000, 8)
    assert await conn.fetchval("SELECT logical_call_id FROM logical_calls WHERE tenant_id = 'acme'"
                               " AND run_id = 'run-1' AND provider_call_id = 'call-1'") == call_id
    await conn.execute(  # another tenant's run of the same id, and its own call-1
        f"INSERT INTO runs (run_id, tenant_id, principal_id, deadline_at, max_calls, max_attempts)"
        f" VALUES ('run-1', 'globex', 'bot', '{LATER.isoformat()}', 8, 16);"
        "INSERT INTO logical_calls (logical_call_id, operation_key, run_id, provider,"
        " provider_call_id, tool_name, tool_version, arguments_hash, canonical_arguments,"
        " principal_id, tenant_id, state, version) VALUES (gen_random_uuid(), 'globex:k', 'run-1',"
        " 'generic', 'call-1', 'wallet.debit', '1', 'sha256:ab', '{}', 'bot', 'globex',"
        " 'VALIDATED', 1)")
    with pytest.raises(asyncpg.ForeignKeyViolationError):  # a call joins its own tenant's run
        await conn.execute(
            "INSERT INTO logical_calls (logical_call_id, operation_key, run_id, provider,"
            " provider_call_id, tool_name, tool_version, arguments_hash, canonical_arguments,"
            " principal_id, tenant_id, state, version) VALUES (gen_random_uuid(), 'initech:k',"
            " 'run-1', 'generic', 'call-2', 'wallet.debit', '1', 'sha256:ab', '{}', 'x',"
            " 'initech', 'VALIDATED', 1)")


async def test_the_dispatchers_runs_leases_and_calls_survive_under_the_pair(conn):
    await _upgraded(conn, "dispatcher", "0007_runs_by_tenant", f"""
        INSERT INTO runs (run_id, tenant_id, principal_id, deadline_at, max_attempts,
                          attempts_used, work_until)
            VALUES ('run-1', 'acme', 'agent-7', '{LATER.isoformat()}', 16, 3,
                    '{LATER.isoformat()}');
        INSERT INTO leases (run_id, owner_id, fence, expires_at)
            VALUES ('run-1', 'worker-a', 4, '{LATER.isoformat()}');
        INSERT INTO calls (logical_call_id, run_id, operation_key, tool_name, tool_version,
            arguments_hash, canonical_arguments, principal_id, tenant_id, intent, policy_version,
            state, version, deadline_at)
            VALUES (gen_random_uuid(), 'run-1', 'acme:k', 'wallet.debit', '1', 'sha256:ab', '{{}}',
                    'agent-7', 'acme', '{{}}', 'p1', 'SUCCEEDED', 5, '{LATER.isoformat()}');
        INSERT INTO stale_writes (run_id, worker_id, held_fence, current_fence, action)
            VALUES ('run-1', 'worker-b', 3, 4, 'record applied')""")
    lease = await conn.fetchrow("SELECT * FROM leases WHERE tenant_id = 'acme' AND run_id = 'run-1'")
    assert (lease["owner_id"], lease["fence"]) == ("worker-a", 4)
    assert await conn.fetchval("SELECT attempts_used FROM runs WHERE tenant_id = 'acme'"
                               " AND run_id = 'run-1'") == 3
    assert await conn.fetchval("SELECT tenant_id FROM stale_writes") == "acme"
    assert await conn.fetchval("SELECT count(*) FROM calls WHERE tenant_id = 'acme'"
                               " AND run_id = 'run-1'") == 1
    await conn.execute(f"INSERT INTO runs (run_id, tenant_id, principal_id, deadline_at,"
                       f" max_attempts, work_until) VALUES ('run-1', 'globex', 'bot',"
                       f" '{LATER.isoformat()}', 16, '{LATER.isoformat()}')")
    assert await conn.fetchval("SELECT count(*) FROM runs WHERE run_id = 'run-1'") == 2


def _refusal(run_id: str) -> str:
    """A whole-message refusal as the intake recorded it before: no tenant in its payload."""
    return json.dumps({"event_id": str(new_event_id()), "event_type": "ProposalRejected",
                       "schema_version": 1, "occurred_at": "2026-03-14T09:00:00+00:00",
                       "run_id": run_id, "producer": "proposal-intake", "payload": {
                           "outcome": "rejected", "run_id": run_id, "call_id": None,
                           "tenant_id": None, "reason_code": "too_deep"}})


async def test_tenantless_events_take_their_runs_tenant_or_leave_the_history(conn):
    """The backfill keeps every run row and its hash what it was (the event was shown to that
    tenant already); an event of no known run is set aside, out of every timeline."""
    orphan, owned = _refusal("nobodys-run"), _refusal("run-1")
    await _upgraded(conn, "projection", "0003_runs_by_tenant", f"""
        INSERT INTO runs (run_id, tenant_id, principal_id, status, calls, stop_reason, updated_at,
                          rejected_proposals, projection_hash, reducer_version)
            VALUES ('run-1', 'acme', 'agent-7', 'completed', 1, 'too_deep', now(), 1,
                    'sha256:h', 'projection.v1');
        INSERT INTO events (event_id, topic, event_type, run_id, tenant_id, occurred_at, envelope)
            SELECT (e->>'event_id')::uuid, 'ledger.intake', 'ProposalRejected', e->>'run_id', NULL,
                   (e->>'occurred_at')::timestamptz, e
            FROM (SELECT '{owned}'::jsonb AS e UNION ALL SELECT '{orphan}'::jsonb) AS old""")
    event = await conn.fetchrow("SELECT tenant_id, envelope FROM events WHERE run_id = 'run-1'")
    assert event["tenant_id"] == "acme"
    assert json.loads(event["envelope"])["payload"]["tenant_id"] == "acme"  # what replay reads
    assert await conn.fetchval("SELECT count(*) FROM events WHERE run_id = 'nobodys-run'") == 0
    kept = await conn.fetchrow("SELECT * FROM events_without_tenant")
    assert (kept["run_id"], kept["tenant_id"]) == ("nobodys-run", None)
    run = await conn.fetchrow("SELECT * FROM runs WHERE tenant_id = 'acme' AND run_id = 'run-1'")
    assert (run["rejected_proposals"], run["stop_reason"], run["projection_hash"]) == (
        1, "too_deep", "sha256:h")
    with pytest.raises(asyncpg.NotNullViolationError):
        await conn.execute("INSERT INTO events (event_id, topic, event_type, run_id, occurred_at,"
                           " envelope) VALUES (gen_random_uuid(), 't', 'X', 'r', now(), '{}')")
