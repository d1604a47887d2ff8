"""What the runner measures, each fact from the record that owns it: business effects from the
downstream's own rows (per operation key), attempts and states from the dispatcher, the event
history and hashes from the projection, what the agent was told from its tenant's ``agent.results.<tenant>``.

Nothing here trusts a service's own summary of itself: "one debit" is a count of rows in
``wallet.debits`` for the key, not a success status.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import asyncpg

from intentledger.chaos.positions import Positions
from intentledger.chaos.submit import Sent
from shared.contracts.fault_protocol import EffectCounter
from shared.contracts.results import TOOL_CALL_SETTLED
from shared.topology import results_topics

BUILT_IN_COUNTERS = {
    "wallet.debit": EffectCounter(
        sql="SELECT count(*) FROM wallet.debits WHERE operation_key = $1",
        remembered_sql="SELECT count(*) FROM wallet.idempotency_keys WHERE operation_key = $1"),
    "wallet.refund": EffectCounter(
        sql="SELECT count(*) FROM wallet.refunds WHERE operation_key = $1",
        remembered_sql="SELECT count(*) FROM wallet.idempotency_keys WHERE operation_key = $1"),
    "inventory.reserve": EffectCounter(
        sql="SELECT count(*) FROM warehouse.reservations WHERE operation_key = $1"),
    "inventory.release": EffectCounter(
        sql="SELECT count(*) FROM warehouse.releases WHERE operation_key = $1"),
    "shipment.schedule": EffectCounter(
        sql="SELECT count(*) FROM warehouse.shipments WHERE operation_key = $1"),
}
UNSETTLED = {"AUTHORIZED", "INTENT_RECORDED", "DISPATCHING", "UNKNOWN", "RECONCILING",
             "MANUAL_REVIEW", "COMPENSATING"}


@dataclass
class Facts:
    calls: dict[str, dict[str, Any]] = field(default_factory=dict)
    runs: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    """Per (run name, tenant): runs are named by tenant and run id (shared/runs.py)."""
    scenario: dict[str, Any] = field(default_factory=dict)
    wallets: dict[str, int | None] = field(default_factory=dict)
    stock: dict[str, int | None] = field(default_factory=dict)
    faults: dict[str, int] = field(default_factory=dict)
    """Per injected fault, how often it fired (``fault_hits``)."""


@dataclass
class Subjects:
    """What a scenario created, by the names its protocol uses."""
    sent: dict[str, Sent]
    run_ids: dict[str, str]
    run_tenants: dict[str, tuple[str, ...]]
    """Run name -> the tenants whose proposals name it: each has a run of that id."""
    wallets: dict[str, str]
    """Protocol id (with ``${nonce}``) -> the wallet's id in this execution."""
    skus: dict[str, str]
    counters: dict[str, EffectCounter]
    started_at: datetime
    """PostgreSQL's clock when the scenario began."""
    raw_placements: list[tuple[str, int, int]] = field(default_factory=list)


async def measure(pool: asyncpg.Pool, subjects: Subjects, *, settled: dict[str, dict] | None = None
                  ) -> Facts:
    """Every fact but the replay verdict (``replay_agrees``), which rebuilds read models."""
    facts = Facts()
    async with pool.acquire() as conn:
        for name, sent in subjects.sent.items():
            facts.calls[name] = await _call(conn, sent, subjects.counters)
            if settled is not None:
                facts.calls[name]["settled"] = settled.get(str(sent.logical_call_id))
        for name, run_id in subjects.run_ids.items():
            for tenant in subjects.run_tenants[name]:
                facts.runs[(name, tenant)] = await _run(conn, tenant, run_id)
        for named, wallet in subjects.wallets.items():
            facts.wallets[named] = await conn.fetchval(
                "SELECT balance_minor FROM wallet.wallets WHERE id = $1", wallet)
        for named, sku in subjects.skus.items():
            facts.stock[named] = await conn.fetchval(
                "SELECT available FROM warehouse.stock WHERE sku = $1", sku)
        facts.scenario = await _scenario(conn, subjects, facts)
    return facts


async def told_the_agent(positions: Positions) -> dict[str, dict[str, Any]]:
    """The latest ``ToolCallSettled`` the agent was sent per intent, on every tenant's results
    topic since the scenario began."""
    latest: dict[str, dict[str, Any]] = {}
    results = await positions.topics(results_topics())
    for record in await positions.since_start(*results):
        try:
            envelope = json.loads(record.value or b"")
        except ValueError:
            continue
        if isinstance(envelope, dict) and envelope.get("event_type") == TOOL_CALL_SETTLED:
            payload = envelope.get("payload") or {}
            latest[str(payload.get("logical_call_id"))] = payload
    return latest


async def _run(conn: asyncpg.Connection, tenant: str, run_id: str) -> dict[str, Any]:
    """One tenant's run, from the record of each service that keeps part of it."""
    row = await conn.fetchrow("SELECT status, stop_reason, projection_hash, rejected_proposals"
                              " FROM projection.runs WHERE tenant_id = $1 AND run_id = $2",
                              tenant, run_id)
    budget = await conn.fetchrow("SELECT call_count, cost_spent_minor FROM proposal_intake.runs"
                                 " WHERE tenant_id = $1 AND run_id = $2", tenant, run_id)
    return {"run_status": row and row["status"], "stop_reason": row and row["stop_reason"],
            "projection_hash": row and row["projection_hash"],
            "rejected_proposals": row and row["rejected_proposals"],
            "run_events": [r["event_type"] for r in await conn.fetch(
                "SELECT event_type FROM projection.events WHERE tenant_id = $1 AND run_id = $2"
                " ORDER BY position", tenant, run_id)],
            "run_calls": budget and budget["call_count"],
            "run_cost_spent_minor": budget and budget["cost_spent_minor"],
            "run_attempts_used": await conn.fetchval(
                "SELECT attempts_used FROM dispatcher.runs WHERE tenant_id = $1 AND run_id = $2",
                tenant, run_id)}


async def _call(conn: asyncpg.Connection, sent: Sent, counters: dict[str, EffectCounter]
                ) -> dict[str, Any]:
    payload = dict(sent.outcome.payload)
    if sent.outcome.status == "pending":  # not answered yet (a snapshot): the intake's own row
        row = await conn.fetchrow(
            "SELECT logical_call_id, operation_key, tool_name FROM proposal_intake.logical_calls "
            "WHERE tenant_id = $1 AND run_id = $2 AND provider_call_id = $3", sent.proposal.tenant,
            sent.run_id, sent.proposal.call_id or sent.proposal.name)
        payload |= {k: str(v) for k, v in row.items()} if row else {}
    call_id = payload.get("logical_call_id")
    key = payload.get("operation_key") or sent.proposal.operation_key
    tool = payload.get("tool_name") or sent.proposal.tool
    fact: dict[str, Any] = {"outcome": sent.outcome.status, "reason": sent.outcome.reason_code,
                            "logical_call_id": call_id, "operation_key": key, "tool": tool,
                            "state": "REJECTED" if sent.outcome.status == "rejected" else None,
                            "attempts": 0, "sends": 0, "lookups": 0, "events": [],
                            "result": None, "receipts": [], "dispatch_reason": None,
                            "compensation_state": None,
                            "compensation_effects": 0, "deadline_slack_s": None}
    fact["business_effects"] = await count_effects(conn, counters, tool, key)
    remembered = await count_effects(conn, counters, tool, key, remembered=True)
    fact["downstream_remembers_key"] = None if remembered is None else remembered > 0
    fact["audit_findings"] = [r["kind"] for r in await conn.fetch(
        "SELECT kind FROM dispatcher.audit_findings WHERE operation_key = $1 ORDER BY kind", key)]
    if call_id is None:
        return fact
    logical = uuid.UUID(call_id)
    row = await conn.fetchrow("SELECT state, reason, result, deadline_at FROM dispatcher.calls "
                              "WHERE logical_call_id = $1", logical)
    projected = await conn.fetchval("SELECT state FROM projection.calls WHERE logical_call_id = $1",
                                    logical)
    fact["state"] = row["state"] if row else projected
    fact["result"] = _json(row["result"]) if row else None
    fact["dispatch_reason"] = row["reason"] if row else None
    fact["receipts"] = [_json(r["receipt"]) for r in await conn.fetch(
        "SELECT receipt FROM dispatcher.attempts WHERE logical_call_id = $1 AND receipt IS NOT NULL"
        " ORDER BY attempt", logical)]
    kinds = await conn.fetch("SELECT kind, count(*) AS n, max(deadline_at) AS last_deadline "
                             "FROM dispatcher.attempts WHERE logical_call_id = $1 GROUP BY kind",
                             logical)
    by_kind = {r["kind"]: r["n"] for r in kinds}
    fact["sends"], fact["lookups"] = by_kind.get("send", 0), by_kind.get("lookup", 0)
    fact["attempts"] = fact["sends"] + fact["lookups"]
    deadlines = [r["last_deadline"] for r in kinds if r["kind"] == "send"]
    if row and deadlines:
        fact["deadline_slack_s"] = round((row["deadline_at"] - max(deadlines)).total_seconds(), 3)
    fact["events"] = [r["event_type"] for r in await conn.fetch(
        "SELECT event_type FROM projection.events WHERE logical_call_id = $1 ORDER BY position",
        logical)]
    compensation = await conn.fetchrow("SELECT state, tool_name, operation_key FROM dispatcher.calls"
                                       " WHERE compensates = $1", logical)
    if compensation:
        fact["compensation_state"] = compensation["state"]
        fact["compensation_effects"] = await count_effects(
            conn, counters, compensation["tool_name"], compensation["operation_key"])
    return fact


async def count_effects(conn: asyncpg.Connection, counters: dict[str, EffectCounter],
                        tool: str | None, key: str | None, *, remembered: bool = False
                        ) -> int | None:
    """Rows for ``key`` in the downstream's own effect table (0 when there is no key yet), or
    with ``remembered`` in its idempotency records."""
    if key is None or tool is None:
        return 0
    counter = counters.get(tool)
    sql = counter and (counter.remembered_sql if remembered else counter.sql)
    if sql is None:
        return None  # not measurable: an assertion on it fails and says so
    if counter.database_url is None:
        return await conn.fetchval(sql, key)
    other = await asyncpg.connect(counter.database_url)
    try:
        return await other.fetchval(sql, key)
    finally:
        await other.close()


async def _scenario(conn: asyncpg.Connection, subjects: Subjects, facts: Facts) -> dict[str, Any]:
    call_ids = {fact["logical_call_id"] for fact in facts.calls.values() if fact["logical_call_id"]}
    dispatched = [fact for fact in facts.calls.values() if fact["attempts"]]
    attempts = sum(fact["attempts"] for fact in {f["logical_call_id"]: f for f in dispatched}.values())
    run_ids = list(subjects.run_ids.values())
    return {
        "calls": len(call_ids),
        "retry_amplification": round(attempts / len(dispatched), 3) if dispatched else 0.0,
        "stale_writes": await conn.fetchval(
            "SELECT count(*) FROM dispatcher.stale_writes WHERE run_id = ANY($1::text[])", run_ids),
        "lost_records": await _set_aside(conn, run_ids, subjects.started_at),
        "dead_letters": len(dead := await _dead_letters(conn, subjects.raw_placements)),
        "dead_letter_reasons": [f"{row['consumer']}: {row['reason']}" for row in dead],
        "unsettled": sorted(name for name, fact in facts.calls.items()
                            if fact["state"] in UNSETTLED),
    }


async def _set_aside(conn: asyncpg.Connection, run_ids: list[str], since: datetime) -> list[str]:
    """Dead letters that mention one of the runs, and outbox rows of the runs the relay parked,
    since the scenario began: records the stack took in and then set aside."""
    found = []
    for schema in await schemas_with(conn, "dead_letters"):
        for row in await conn.fetch(f'SELECT consumer, topic, reason, value FROM "{schema}".'
                                    "dead_letters WHERE created_at >= $1", since):
            if any(run_id.encode() in (row["value"] or b"") for run_id in run_ids):
                found.append(f"dead letter {row['consumer']} {row['topic']}: {row['reason']}")
    for schema in await schemas_with(conn, "outbox"):
        for row in await conn.fetch(f'SELECT topic, park_reason FROM "{schema}".outbox WHERE '
                                    "status = 'parked' AND partition_key = ANY($1::text[])", run_ids):
            found.append(f"parked {schema} {row['topic']}: {row['park_reason']}")
    return found


async def schemas_with(conn: asyncpg.Connection, table: str) -> list[str]:
    return [r["table_schema"] for r in await conn.fetch(
        "SELECT table_schema FROM information_schema.tables WHERE table_name = $1", table)]


async def _dead_letters(conn: asyncpg.Connection, placements: list[tuple[str, int, int]]
                        ) -> list[dict[str, Any]]:
    """Dead letters, in any service's schema, of the raw records the scenario published."""
    if not placements:
        return []
    found = []
    for schema in await schemas_with(conn, "dead_letters"):
        for topic, partition, offset in placements:
            found += [dict(r) | {"schema": schema} for r in await conn.fetch(
                f'SELECT consumer, topic, kafka_partition, kafka_offset, reason FROM "{schema}".dead_letters'
                " WHERE topic = $1 AND kafka_partition = $2 AND kafka_offset = $3",
                topic, partition, offset)]
    return found


def _json(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str) else value
