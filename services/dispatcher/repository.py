"""The dispatcher's SQL, in schema ``dispatcher``. Rows read for a decision are locked."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

import asyncpg

from shared.contracts.dispatch import CallState
from shared.runs import RunKey

SCHEMA = "dispatcher"
NOTIFY_CHANNEL = "intentledger_dispatcher"


@dataclass(frozen=True)
class Call:
    logical_call_id: uuid.UUID
    run_id: str
    operation_key: str
    tool_name: str
    tool_version: str
    arguments_hash: str
    canonical_arguments: dict[str, Any]
    principal_id: str
    tenant_id: str
    intent: dict[str, Any]
    capability: dict[str, Any] | None
    policy_version: str
    state: CallState
    version: int
    fence: int
    attempts: int
    lookups: int
    deadline_at: datetime
    result: dict[str, Any] | None
    receipt_id: str | None
    compensates: uuid.UUID | None
    succeeded_at: datetime | None
    traceparent: str | None
    policy_refusal: dict[str, Any] | None
    """A compensation's: the policy's refusal of its proposal, not yet recorded as a denial."""
    capacity: str | None = None
    """In line for a slot of its tool's ``max_in_flight`` ('waiting'), or holding one kept for
    it ('admitted'): ``capacity.py``. Cleared by every transition."""

    @classmethod
    def of(cls, row: asyncpg.Record) -> Call:
        values = {name: row[name] for name in cls.__dataclass_fields__}
        for name in ("canonical_arguments", "intent", "capability", "result", "policy_refusal"):
            values[name] = json.loads(values[name]) if values[name] is not None else None
        values["state"] = CallState(values["state"])
        return cls(**values)

    @property
    def run(self) -> RunKey:
        return RunKey(self.tenant_id, self.run_id)

    def with_version(self, state: CallState, version: int) -> Call:
        return replace(self, state=state, version=version)


@dataclass(frozen=True)
class Attempt:
    attempt: int
    kind: str
    fence: int
    worker_id: str
    started_at: datetime
    deadline_at: datetime
    status: str | None
    detail: str | None
    receipt: dict[str, Any] | None
    finished_at: datetime | None


@dataclass(frozen=True)
class Cancellation:
    event_id: uuid.UUID
    operator_id: str
    reason: str
    compensate: bool


@dataclass(frozen=True)
class Run:
    tenant_id: str
    run_id: str
    deadline_at: datetime
    max_attempts: int
    attempts_used: int
    aborted_at: datetime | None
    abort_reason: str | None
    work_until: datetime
    compensates: bool
    """Whether the run's stop undoes its done steps (a failure) or leaves them (out of budget)."""
    abort_code: str | None = None
    """Why it stopped, as a ``DispatchReason`` (None for runs stopped before it was recorded)."""
    cancellation: Cancellation | None = None
    """An operator's cancellation of the run, waiting for the run's next step."""

    @property
    def key(self) -> RunKey:
        return RunKey(self.tenant_id, self.run_id)


async def insert_run(conn: asyncpg.Connection, run: RunKey, principal_id: str,
                     deadline_at: datetime, max_attempts: int) -> None:
    await conn.execute(
        f"INSERT INTO {SCHEMA}.runs (run_id, tenant_id, principal_id, deadline_at, max_attempts,"
        " work_until) VALUES ($1, $2, $3, $4, $5, $4) ON CONFLICT (tenant_id, run_id) DO NOTHING",
        run.run_id, run.tenant_id, principal_id, deadline_at, max_attempts)


async def insert_call(conn: asyncpg.Connection, *, intent: dict[str, Any],
                      capability: dict[str, Any] | None, policy_version: str, deadline_at: datetime,
                      compensates: uuid.UUID | None = None, traceparent: str | None = None,
                      state: CallState = CallState.AUTHORIZED, due_at: datetime | None = None) -> bool:
    """A new call, due at ``due_at`` (default: at once); False if this intent is already known
    (a redelivery).
    Another call under the same operation key is not a redelivery: it raises UniqueViolation
    (the consumer dead-letters it, visibly) instead of vanishing."""
    inserted = await conn.fetchval(
        f"INSERT INTO {SCHEMA}.calls (logical_call_id, run_id, operation_key, tool_name,"
        " tool_version, arguments_hash, canonical_arguments, principal_id, tenant_id, intent,"
        " capability, policy_version, state, version, deadline_at, next_action_at, compensates,"
        " traceparent) VALUES ($1, $2, $3, $4, $5, $6, $7::jsonb, $8, $9, $10::jsonb, $11::jsonb,"
        " $12, $13, 1, $14, coalesce($17, now()), $15, $16) ON CONFLICT (logical_call_id) DO NOTHING"
        " RETURNING true",
        uuid.UUID(str(intent["logical_call_id"])), intent["run_id"], intent["operation_key"],
        intent["tool_name"], intent["tool_version"], intent["arguments_hash"],
        json.dumps(intent["canonical_arguments"]), intent["principal_id"], intent["tenant_id"],
        json.dumps(intent), json.dumps(capability) if capability is not None else None,
        policy_version, state, deadline_at, compensates, traceparent, due_at)
    return bool(inserted)


async def authorize_compensation(conn: asyncpg.Connection, logical_call_id: uuid.UUID,
                                 capability: dict[str, Any] | None, policy_version: str,
                                 refusal: dict[str, Any] | None) -> bool:
    """The policy's answer to a compensation's proposal, its capability or its refusal, onto
    the waiting call (``wake`` it then); False (nothing changed) unless the call is a
    compensation still waiting for its first answer (a redelivered answer changes nothing)."""
    return bool(await conn.fetchval(
        f"UPDATE {SCHEMA}.calls SET capability = $2::jsonb, policy_version = $3,"
        " policy_refusal = $4::jsonb"
        " WHERE logical_call_id = $1 AND compensates IS NOT NULL AND state = 'AUTHORIZED'"
        "   AND capability IS NULL AND policy_refusal IS NULL RETURNING true",
        logical_call_id, json.dumps(capability) if capability is not None else None,
        policy_version, json.dumps(refusal) if refusal is not None else None))


async def call_for_update(conn: asyncpg.Connection, logical_call_id: uuid.UUID) -> Call | None:
    row = await conn.fetchrow(f"SELECT * FROM {SCHEMA}.calls WHERE logical_call_id = $1 FOR UPDATE",
                              logical_call_id)
    return Call.of(row) if row else None


async def run_for_update(conn: asyncpg.Connection, run: RunKey) -> Run:
    return (await runs_for_update(conn, [run]))[run]


async def runs_for_update(conn: asyncpg.Connection, runs: list[RunKey]) -> dict[RunKey, Run]:
    """Locked in run order, like the leases, so two batches cannot deadlock on them."""
    rows = await conn.fetch(
        f"SELECT r.tenant_id, r.run_id, deadline_at, max_attempts, attempts_used, aborted_at,"
        f" abort_reason, work_until, compensates, abort_code, c.event_id, c.request"
        f" FROM {SCHEMA}.runs r LEFT JOIN LATERAL ("
        f"   SELECT event_id, request FROM {SCHEMA}.cancellations"
        "    WHERE tenant_id = r.tenant_id AND run_id = r.run_id AND status = 'pending'"
        "    ORDER BY received_at, event_id LIMIT 1) c ON true"
        " WHERE (r.tenant_id, r.run_id) IN (SELECT * FROM unnest($1::text[], $2::text[]))"
        " ORDER BY r.tenant_id, r.run_id FOR NO KEY UPDATE OF r",
        [run.tenant_id for run in runs], [run.run_id for run in runs])
    return {RunKey.of(row): _run(row) for row in rows}


def _run(row: asyncpg.Record) -> Run:
    fields = dict(row)
    event_id, request = fields.pop("event_id"), fields.pop("request")
    if event_id is not None:
        request = json.loads(request)
        fields["cancellation"] = Cancellation(event_id, request["operator_id"],
                                              request["reason"], request["compensate"])
    return Run(**fields)


ATTEMPTS = (f"ARRAY(SELECT ROW(logical_call_id, attempt, kind, fence, worker_id, started_at,"
            f" deadline_at, status, detail, receipt, finished_at) FROM {SCHEMA}.attempts"
            " WHERE logical_call_id = ANY($1::uuid[]) ORDER BY logical_call_id, attempt)")
"""SQL, an array: the attempts of the calls ``$1``, each a row of the call's id and then an
``Attempt``'s fields in their order (``reads.py`` asks for it beside the batch's other reads)."""


def attempts_from(rows: list[tuple], call_ids: list[uuid.UUID]
                  ) -> dict[uuid.UUID, list[Attempt]]:
    """Each call's attempts, in order (a call without any maps to an empty list)."""
    found: dict[uuid.UUID, list[Attempt]] = {call_id: [] for call_id in call_ids}
    for logical_call_id, *values in rows:
        attempt = Attempt(*values)
        if attempt.receipt is not None:  # jsonb in a row comes as its text
            attempt = replace(attempt, receipt=json.loads(attempt.receipt))
        found[logical_call_id].append(attempt)
    return found


async def finish_attempt(conn: asyncpg.Connection, logical_call_id: uuid.UUID, attempt: int,
                         status: str, detail: str, receipt: dict[str, Any] | None) -> bool:
    """Record what an attempt came to, once: the first answer is the evidence; a later copy
    (a redelivered receipt) changes nothing."""
    updated = await conn.fetchval(
        f"UPDATE {SCHEMA}.attempts SET status = $3, detail = $4, receipt = $5::jsonb,"
        " finished_at = now() WHERE logical_call_id = $1 AND attempt = $2 AND status IS NULL"
        " RETURNING true",
        logical_call_id, attempt, status, detail, json.dumps(receipt) if receipt else None)
    return bool(updated)


async def postpone(conn: asyncpg.Connection, call: Call, until: datetime | None) -> None:
    await conn.execute(f"UPDATE {SCHEMA}.calls SET next_action_at = $2 WHERE logical_call_id = $1",
                       call.logical_call_id, until)


async def wait_for_capacity(conn: asyncpg.Connection, call: Call, until: datetime) -> None:
    """In line for a slot of the call's tool (``capacity.py``), until ``until`` at the latest
    (``next_action_at`` also orders the line)."""
    await conn.execute(f"UPDATE {SCHEMA}.calls SET capacity = 'waiting', next_action_at = $2"
                       " WHERE logical_call_id = $1", call.logical_call_id, until)


def stopped_because(code: str, detail: str) -> str:
    """What a run records as why it stopped (``runs.abort_reason``)."""
    return f"{code}: {detail}"


async def abort_run(conn: asyncpg.Connection, run: RunKey, code: str, detail: str, *,
                    compensate: bool = True) -> bool:
    """True the first time: the run stops dispatching (``code``: a ``DispatchReason``), and
    its done steps get compensated if ``compensate``."""
    return bool(await conn.fetchval(
        f"UPDATE {SCHEMA}.runs SET aborted_at = now(), abort_code = $3, abort_reason = $4,"
        " compensates = $5"
        " WHERE tenant_id = $1 AND run_id = $2 AND aborted_at IS NULL RETURNING true",
        run.tenant_id, run.run_id, code, stopped_because(code, detail), compensate))


async def extend_work(conn: asyncpg.Connection, run: RunKey, until: datetime) -> None:
    await conn.execute(f"UPDATE {SCHEMA}.runs SET work_until = greatest(work_until, $3)"
                       " WHERE tenant_id = $1 AND run_id = $2", run.tenant_id, run.run_id, until)


async def saga_position(conn: asyncpg.Connection, run: RunKey) -> tuple[bool, list[Call]]:
    """(a compensation is in flight, the succeeded calls not yet compensated, latest first)."""
    rows = await conn.fetch(
        f"SELECT * FROM {SCHEMA}.calls WHERE tenant_id = $1 AND run_id = $2"
        " AND state IN ('SUCCEEDED', 'COMPENSATING') AND compensates IS NULL"
        " ORDER BY succeeded_at DESC, logical_call_id DESC FOR UPDATE", run.tenant_id, run.run_id)
    calls = [Call.of(row) for row in rows]
    return (any(call.state == CallState.COMPENSATING for call in calls),
            [call for call in calls if call.state == CallState.SUCCEEDED])


async def unsent_calls(conn: asyncpg.Connection, run: RunKey) -> list[Call]:
    rows = await conn.fetch(
        f"SELECT * FROM {SCHEMA}.calls WHERE tenant_id = $1 AND run_id = $2 AND state IN"
        " ('AUTHORIZED', 'INTENT_RECORDED') AND compensates IS NULL FOR UPDATE SKIP LOCKED",
        run.tenant_id, run.run_id)
    return [Call.of(row) for row in rows]


async def unresolved(conn: asyncpg.Connection) -> tuple[int, float]:
    """(calls whose outcome is unknown now, seconds since the oldest became unknown)."""
    row = await conn.fetchrow(
        f"SELECT count(*) AS calls, coalesce(extract(epoch FROM clock_timestamp() - min(("
        f"  SELECT min(a.finished_at) FROM {SCHEMA}.attempts a"
        f"  WHERE a.logical_call_id = c.logical_call_id AND a.status = 'unknown'))), 0) AS age"
        f" FROM {SCHEMA}.calls c WHERE c.state IN ('UNKNOWN', 'RECONCILING')")
    return row["calls"], float(row["age"])


async def awaiting_review(conn: asyncpg.Connection) -> int:
    """Calls in MANUAL_REVIEW now: each waits for a person."""
    return await conn.fetchval(f"SELECT count(*) FROM {SCHEMA}.calls WHERE state = 'MANUAL_REVIEW'")
