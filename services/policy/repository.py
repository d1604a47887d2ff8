"""The policy's SQL: versions, decisions and approvals in schema ``policy``.

Rows read to decide are locked until the transaction ends: a call's decision row while an
approval or the expiry sweep changes it, and the scopes of the limits being counted (so two
consumers cannot both take the last call a window allows).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import asyncpg

from services.policy.approvals import PendingCall
from shared.policy.document import ApprovalRule, Policy
from shared.policy.limits import AllowedTotal
from services.policy.verdicts import Verdict
from shared.contracts.approvals import ApprovalDecision
from shared.contracts.authorizations import GrantedApproval
from shared.contracts.intake import Intent

SCHEMA = "policy"
Executor = asyncpg.Connection | asyncpg.Pool


@dataclass(frozen=True)
class StoredDecision:
    decision_id: uuid.UUID
    version: int
    outcome: str
    policy_version: str
    rule: str | None
    intent: Intent
    amount: tuple[int, str] | None
    requirement: ApprovalRule | None
    expires_at: datetime | None
    inputs: dict[str, Any]

    @property
    def pending(self) -> PendingCall:
        return PendingCall(self.outcome, self.intent, self.requirement, self.expires_at)


async def record_version(db: Executor, policy: Policy) -> None:
    """Idempotent: every replica records the versions it activates."""
    await db.execute(
        f"INSERT INTO {SCHEMA}.policy_versions (version, document) VALUES ($1, $2::jsonb) "
        "ON CONFLICT (version) DO NOTHING", policy.version, json.dumps(policy.document()))


async def insert_decision(conn: asyncpg.Connection, intent: Intent,
                          amount: tuple[int, str] | None, verdict: Verdict) -> bool:
    """False when the call already has a decision: a redelivered intent changes nothing."""
    return bool(await insert_decisions(conn, [(intent, amount, verdict)]))


_DECISION_TYPES = ("uuid", "uuid", "text", "text", "text", "text", "text", "text", "int8", "text",
                   "text", "text", "text", "text", "jsonb", "jsonb", "timestamptz", "timestamptz",
                   "jsonb")


async def insert_decisions(conn: asyncpg.Connection,
                           decided: list[tuple[Intent, tuple[int, str] | None, Verdict]]
                           ) -> set[uuid.UUID]:
    """One statement; the calls whose decision was inserted (the others had one already)."""
    rows = [(verdict.decision_id, intent.logical_call_id, intent.run_id, intent.tenant_id,
             intent.principal_id, intent.tool_name, intent.operation_key, intent.arguments_hash,
             *(amount if amount is not None else (None, None)), *_written(verdict))
            for intent, amount, verdict in decided]
    arrays = ", ".join(f"${n}::{kind}[]" for n, kind in enumerate(_DECISION_TYPES, 1))
    inserted = await conn.fetch(
        f"INSERT INTO {SCHEMA}.decisions (decision_id, logical_call_id, run_id, tenant_id, "
        "principal_id, tool_name, operation_key, arguments_hash, amount_minor, currency, outcome, "
        "rule, policy_version, reason_code, inputs, approval, issued_at, expires_at, capability) "
        f"SELECT * FROM unnest({arrays}) ON CONFLICT (logical_call_id) DO NOTHING "
        "RETURNING logical_call_id",
        *([row[n] for row in rows] for n in range(len(_DECISION_TYPES))))
    return {row["logical_call_id"] for row in inserted}


async def decided(conn: asyncpg.Connection, calls: list[uuid.UUID]) -> set[uuid.UUID]:
    """The calls among these that have a decision already."""
    rows = await conn.fetch(f"SELECT logical_call_id FROM {SCHEMA}.decisions "
                            "WHERE logical_call_id = ANY($1::uuid[])", calls)
    return {row["logical_call_id"] for row in rows}


async def conclude(conn: asyncpg.Connection, stored: StoredDecision, verdict: Verdict) -> None:
    """Compare-and-swap from the version read under the row lock."""
    done = await conn.fetchval(
        f"UPDATE {SCHEMA}.decisions SET outcome = $3, rule = $4, policy_version = $5, "
        "reason_code = $6, inputs = $7::jsonb, approval = $8::jsonb, issued_at = $9, "
        "expires_at = $10, capability = $11::jsonb, version = version + 1 "
        "WHERE decision_id = $1 AND version = $2 AND outcome = 'awaiting_approval' RETURNING 1",
        stored.decision_id, stored.version, *_written(verdict))
    if done is None:
        raise RuntimeError(f"decision {stored.decision_id} changed under its row lock")


def _written(verdict: Verdict) -> tuple:
    return (verdict.outcome, verdict.rule, verdict.policy_version, verdict.reason_code,
            json.dumps(verdict.inputs | {"message": verdict.message}),
            verdict.approval.model_dump_json() if verdict.approval else None,
            verdict.issued_at, verdict.expires_at,
            verdict.capability.model_dump_json() if verdict.capability else None)


async def decision_for_update(conn: asyncpg.Connection,
                              logical_call_id: uuid.UUID) -> StoredDecision | None:
    row = await conn.fetchrow(f"SELECT * FROM {SCHEMA}.decisions WHERE logical_call_id = $1 "
                              "FOR UPDATE", logical_call_id)
    return _stored(row) if row else None


async def lapsed_for_update(conn: asyncpg.Connection, now: datetime,
                            limit: int) -> list[StoredDecision]:
    """Approval requests nobody answered in time; another replica's are skipped, not waited on."""
    rows = await conn.fetch(
        f"SELECT * FROM {SCHEMA}.decisions WHERE outcome = 'awaiting_approval' AND expires_at <= $1 "
        "ORDER BY expires_at LIMIT $2 FOR UPDATE SKIP LOCKED", now, limit)
    return [_stored(row) for row in rows]


async def awaiting_of_run_for_update(conn: asyncpg.Connection, tenant_id: str,
                                     run_id: str) -> list[StoredDecision]:
    """The run's approval requests still open, locked (an approval being applied to one right
    now is waited for: it may conclude it first)."""
    rows = await conn.fetch(
        f"SELECT * FROM {SCHEMA}.decisions WHERE tenant_id = $1 AND run_id = $2"
        " AND outcome = 'awaiting_approval' ORDER BY logical_call_id FOR UPDATE", tenant_id, run_id)
    return [_stored(row) for row in rows]


def _stored(row: asyncpg.Record) -> StoredDecision:
    inputs = json.loads(row["inputs"])
    amount = (row["amount_minor"], row["currency"]) if row["amount_minor"] is not None else None
    requirement = ApprovalRule.model_validate_json(row["approval"]) if row["approval"] else None
    return StoredDecision(row["decision_id"], row["version"], row["outcome"], row["policy_version"],
                          row["rule"], Intent.model_validate(inputs["intent"]), amount,
                          requirement, row["expires_at"], inputs)


async def lock_keys(conn: asyncpg.Connection, namespace: str, keys: Iterable[str]) -> None:
    """Transaction-level advisory locks on ``intentledger.policy.<namespace>:<key>``, taken in
    sorted order so two takers cannot deadlock (one statement: ``unnest`` yields the sorted
    array in order)."""
    await conn.execute("SELECT pg_advisory_xact_lock(hashtextextended($1 || ':' || key, 0))"
                       " FROM unnest($2::text[]) AS key", f"intentledger.policy.{namespace}",
                       sorted(set(keys)))


Window = tuple[str, str, datetime]
"""(scope, the tenant or principal id, since): the allowed calls one limit counts."""


async def allowed_totals(conn: asyncpg.Connection, windows: list[Window]) -> list[list[AllowedTotal]]:
    """For each window, what was allowed in it, by tool and currency; one statement.

    The upper bound ``issued_at < 'infinity'`` is always true and is there for the planner:
    a window's start comes from the array, so the planner cannot see it and guesses that a
    third of the scope's decisions are newer; with two bounds it guesses a range (0.5%). On
    the guess of a third, reading the whole table cost it about as much as the index, and
    which one it chose depended on the table's bloat
    (``tests/integration/test_policy_hot_queries.py``)."""
    rows = await conn.fetch(
        "SELECT w.n, d.tool_name, d.currency, count(*) AS calls,"
        " coalesce(sum(d.amount_minor), 0)::bigint AS amount"
        " FROM unnest($1::text[], $2::text[], $3::timestamptz[]) WITH ORDINALITY AS w(scope, id, since, n)"
        " CROSS JOIN LATERAL ("
        f"  SELECT tool_name, currency, amount_minor, inputs FROM {SCHEMA}.decisions"
        "   WHERE w.scope = 'tenant' AND outcome = 'allowed' AND tenant_id = w.id"
        "   AND issued_at > w.since AND issued_at < 'infinity'"
        "  UNION ALL"
        f"  SELECT tool_name, currency, amount_minor, inputs FROM {SCHEMA}.decisions"
        "   WHERE w.scope <> 'tenant' AND outcome = 'allowed' AND principal_id = w.id"
        "   AND issued_at > w.since AND issued_at < 'infinity') AS d"
        " WHERE d.inputs->'intent'->>'compensates' IS NULL"  # giving back uses up no limit
        " GROUP BY w.n, d.tool_name, d.currency",
        [w[0] for w in windows], [w[1] for w in windows], [w[2] for w in windows])
    totals: list[list[AllowedTotal]] = [[] for _ in windows]
    for r in rows:
        totals[r["n"] - 1].append(AllowedTotal(r["tool_name"], r["currency"], r["calls"], r["amount"]))
    return totals


async def insert_approval(conn: asyncpg.Connection, event_id: uuid.UUID,
                          approval: ApprovalDecision, outcome: str, reason: str | None) -> None:
    await conn.execute(
        f"INSERT INTO {SCHEMA}.approvals (approval_event_id, logical_call_id, approver_id, "
        "decision, outcome, reason_code, decided_at, expires_at, payload) "
        "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9::jsonb) ON CONFLICT DO NOTHING",
        event_id, approval.logical_call_id, approval.approver_id, approval.decision, outcome,
        reason, approval.decided_at, approval.expires_at, approval.model_dump_json())


async def counted_grants(conn: asyncpg.Connection,
                         logical_call_id: uuid.UUID) -> list[GrantedApproval]:
    """Newest first, so a fresh grant is the one that counts for its approver."""
    rows = await conn.fetch(
        f"SELECT approval_event_id, approver_id, decided_at, expires_at FROM {SCHEMA}.approvals "
        "WHERE logical_call_id = $1 AND outcome = 'counted' AND decision = 'granted' "
        "ORDER BY received_at DESC, approval_event_id DESC", logical_call_id)
    return [GrantedApproval(**dict(row)) for row in rows]
