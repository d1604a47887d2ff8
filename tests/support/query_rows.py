"""Read-model rows written straight into ``projection.runs/calls/events``, as the projection
service would, so the query API and CLI are tested without depending on it. Every run id and
tenant is unique per test: the tables are shared with every other test. The rows are not real
events, so ``forget_seeded`` removes them after each test: ``intentledger replay --verify`` over
the whole history must keep passing."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import asyncpg

from shared.ids import new_event_id


_SEEDED: set[str] = set()


def seeded() -> bool:
    return bool(_SEEDED)


async def forget_seeded(pool: asyncpg.Pool) -> None:
    runs = list(_SEEDED)
    for table in ("events", "calls", "runs"):
        await pool.execute(f"DELETE FROM projection.{table} WHERE run_id = ANY($1::text[])", runs)
    _SEEDED.difference_update(runs)


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


@dataclass
class SeededRun:
    run_id: str
    tenant: str
    principal: str
    calls: list[uuid.UUID] = field(default_factory=list)
    events: list[uuid.UUID] = field(default_factory=list)


async def seed_run(pool: asyncpg.Pool, tenant: str, *, principal: str = "agent-1",
                   status: str = "RUNNING", updated_at: datetime | None = None,
                   run_id: str | None = None) -> SeededRun:
    run = SeededRun(run_id or unique("run"), tenant, principal)
    _SEEDED.add(run.run_id)
    await pool.execute(
        "INSERT INTO projection.runs (run_id, tenant_id, principal_id, status, calls, updated_at, "
        "projection_hash, reducer_version) VALUES ($1, $2, $3, $4, 0, $5, 'sha256:seeded', 'seed')",
        run.run_id, tenant, principal, status,
        updated_at or datetime.now(UTC))
    return run


async def seed_call(pool: asyncpg.Pool, run: SeededRun, *, state: str = "SUCCEEDED",
                    tool: str = "wallet.debit", unknown_for: float | None = None,
                    updated_at: datetime | None = None, compensates: uuid.UUID | None = None,
                    attempts: int = 1, result: object = None) -> uuid.UUID:
    """A call (UUIDv7 id, so creation order); ``unknown_for`` seconds sets ``unknown_since``."""
    call_id = new_event_id()
    now = datetime.now(UTC)
    await pool.execute(
        "INSERT INTO projection.calls (logical_call_id, run_id, tenant_id, principal_id, "
        "provider_call_id, operation_key, tool_name, tool_version, arguments_hash, state, version, "
        "policy_version, worker_id, fence, attempts, receipt_id, result, compensates, unknown_since, "
        "updated_at, stage, last_event_id) VALUES ($1, $2, $3, $4, 'toolu_1', $5, $6, '1', 'sha256:ab', "
        "$7, 3, 'policy-v7', 'worker-a', 2, $8, $9, $10, $11, $12, $13, 3, $1)",
        call_id, run.run_id, run.tenant, run.principal, f"key-{call_id}", tool, state, attempts,
        f"rcpt-{call_id}", json.dumps(result or {"balance_minor": 6000}), compensates,
        None if unknown_for is None else now - timedelta(seconds=unknown_for), updated_at or now)
    await pool.execute("UPDATE projection.runs SET calls = calls + 1 WHERE tenant_id = $1 AND run_id = $2",
                       run.tenant, run.run_id)
    run.calls.append(call_id)
    return call_id


async def seed_event(pool: asyncpg.Pool, run: SeededRun, event_type: str, *,
                     call: uuid.UUID | None = None, attempt: int | None = None,
                     occurred_at: datetime | None = None,
                     payload: dict | None = None) -> uuid.UUID:
    """One history event with every audit field filled; ``payload`` adds fields to the
    event's payload."""
    event_id = new_event_id()
    envelope = {"event_id": str(event_id), "event_type": event_type, "run_id": run.run_id,
                "payload": {"logical_call_id": str(call) if call else None, "attempt": attempt,
                            **(payload or {})}}
    await pool.execute(
        "INSERT INTO projection.events (event_id, topic, event_type, run_id, tenant_id, "
        "logical_call_id, principal_id, policy_version, worker_id, fence, attempt, receipt_id, "
        "trace_id, occurred_at, envelope) VALUES ($1, 'ledger.dispatch', $2, $3, $4, $5, $6, "
        "'policy-v7', 'worker-a', 2, $7, $8, $9, $10, $11)",
        event_id, event_type, run.run_id, run.tenant, call, run.principal,
        attempt, f"rcpt-{call}" if call else None, f"trace-{event_id.hex[:16]}",
        occurred_at or datetime.now(UTC), json.dumps(envelope))
    run.events.append(event_id)
    return event_id
