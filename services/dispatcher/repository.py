"""The dispatcher's SQL, in schema ``dispatcher``. Rows read for a decision are locked."""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

import asyncpg

from shared.contracts.dispatch import CallState
from shared.db.plans import run_keys
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


@dataclass(frozen=True)
class NewRun:
    run: RunKey
    principal_id: str
    deadline_at: datetime
    max_attempts: int


@dataclass(frozen=True)
class NewCall:
    intent: dict[str, Any]
    capability: dict[str, Any] | None
    policy_version: str
    deadline_at: datetime
    compensates: uuid.UUID | None = None
    traceparent: str | None = None
    state: CallState = CallState.AUTHORIZED
    due_at: datetime | None = None
    """Default: due at once."""


async def insert_calls(conn: asyncpg.Connection, calls: Sequence[NewCall],
                       runs: Sequence[NewRun] = ()) -> set[uuid.UUID]:
    """New calls, and the runs they start, in one statement (a consumed batch of
    authorizations costs one round trip, not two per authorization); returns the calls that
    are new. A call whose intent is known already is a redelivery and changes nothing; a run
    known already keeps the deadline and budget its first call set.
    Another call under the same operation key is not a redelivery: it raises UniqueViolation
    (the consumer dead-letters it, visibly) instead of vanishing."""
    rows = await conn.fetch(
        f"WITH runs AS (INSERT INTO {SCHEMA}.runs (run_id, tenant_id, principal_id, deadline_at,"
        "   max_attempts, work_until)"
        "   SELECT r, t, p, d, m, d FROM unnest($1::text[], $2::text[], $3::text[],"
        "     $4::timestamptz[], $5::int[]) AS n(r, t, p, d, m)"
        "   ON CONFLICT (tenant_id, run_id) DO NOTHING) "
        f"INSERT INTO {SCHEMA}.calls (logical_call_id, run_id, operation_key, tool_name,"
        " tool_version, arguments_hash, canonical_arguments, principal_id, tenant_id, intent,"
        " capability, policy_version, state, version, deadline_at, next_action_at, compensates,"
        " traceparent) SELECT (i->>'logical_call_id')::uuid, i->>'run_id', i->>'operation_key',"
        " i->>'tool_name', i->>'tool_version', i->>'arguments_hash', i->'canonical_arguments',"
        " i->>'principal_id', i->>'tenant_id', i, c, v, s, 1, d, coalesce(due, now()), comp, tp"
        " FROM unnest($6::jsonb[], $7::jsonb[], $8::text[], $9::text[], $10::timestamptz[],"
        "   $11::timestamptz[], $12::uuid[], $13::text[]) AS n(i, c, v, s, d, due, comp, tp)"
        " ON CONFLICT (logical_call_id) DO NOTHING RETURNING logical_call_id",
        [run.run.run_id for run in runs], [run.run.tenant_id for run in runs],
        [run.principal_id for run in runs], [run.deadline_at for run in runs],
        [run.max_attempts for run in runs],
        [json.dumps(call.intent) for call in calls],
        [None if call.capability is None else json.dumps(call.capability) for call in calls],
        [call.policy_version for call in calls], [str(call.state) for call in calls],
        [call.deadline_at for call in calls], [call.due_at for call in calls],
        [call.compensates for call in calls], [call.traceparent for call in calls])
    return {row["logical_call_id"] for row in rows}


async def insert_call(conn: asyncpg.Connection, call: NewCall) -> bool:
    """``insert_calls`` of one call whose run exists; False if its intent is known already."""
    return uuid.UUID(str(call.intent["logical_call_id"])) in await insert_calls(conn, [call])


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
    """One call, its row locked until the transaction ends (``None`` when there is none). A
    batch of calls is locked in id order instead (``due.waiting_calls_for_update``)."""
    row = await conn.fetchrow(
        f"SELECT * FROM {SCHEMA}.calls WHERE logical_call_id = $1 FOR UPDATE", logical_call_id)
    return Call.of(row) if row is not None else None


def runs_locked(tenants: str, run_ids: str) -> str:
    """SQL, an array: the runs named by the text-array parameters ``tenants`` and ``run_ids``
    (e.g. ``'$1'``), each locked by its key as the sorted keys are walked (in run order, like
    the leases, so two batches cannot deadlock on them; the keys hidden from the planner:
    ``shared.db.plans``); each a row of a ``Run``'s fields, then its oldest pending
    cancellation's event id and request (``runs_from``; ``reads.py`` reads it with the rest)."""
    return (
        "ARRAY(SELECT ROW(r.tenant_id, r.run_id, r.deadline_at, r.max_attempts, r.attempts_used,"
        " r.aborted_at, r.abort_reason, r.work_until, r.compensates, r.abort_code, c.event_id,"
        f" c.request) FROM {run_keys(tenants, run_ids)}"
        f" CROSS JOIN LATERAL (SELECT * FROM {SCHEMA}.runs WHERE tenant_id = k.tenant_id"
        "   AND run_id = k.run_id FOR NO KEY UPDATE) AS r"
        f" LEFT JOIN LATERAL (SELECT event_id, request FROM {SCHEMA}.cancellations"
        "   WHERE tenant_id = r.tenant_id AND run_id = r.run_id AND status = 'pending'"
        "   ORDER BY received_at, event_id LIMIT 1) c ON true"
        " ORDER BY r.tenant_id, r.run_id)")


def runs_from(rows: list[tuple]) -> dict[RunKey, Run]:
    """The runs of ``runs_locked``'s rows, by key."""
    runs = {}
    for *fields, event_id, request in rows:
        cancellation = None
        if event_id is not None:
            request = json.loads(request)
            cancellation = Cancellation(event_id, request["operator_id"], request["reason"],
                                        request["compensate"])
        run = Run(*fields, cancellation=cancellation)
        runs[run.key] = run
    return runs


async def run_for_update(conn: asyncpg.Connection, run: RunKey) -> Run:
    rows = await conn.fetchval(f"SELECT {runs_locked('$1', '$2')}", [run.tenant_id],
                               [run.run_id])
    return runs_from(rows)[run]


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
