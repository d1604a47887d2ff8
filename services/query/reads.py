"""The read-model queries the API and the CLI share. Each takes a connection from
``access.scoped``: row-level security has already narrowed what it can see to one tenant (or
to every tenant for an operator), so nothing here filters by caller."""

from __future__ import annotations

import json
import uuid

import asyncpg

from services.query.filters import CallFilters, RunFilters, TimelineFilters
from services.query.models import (Call, Compensation, Page, Run, RunDetail, TimelineEvent,
                                   UnknownCall)
from services.query.paging import Keyset, Select
from shared.runs import RunKey

UNKNOWN_STATES = ("UNKNOWN", "RECONCILING")
COMPENSATION_STATES = ("COMPENSATING", "COMPENSATED", "COMPENSATION_FAILED")

RUN_COLUMNS = "run_id, tenant_id, principal_id, status, calls, stop_reason, updated_at"
CALL_COLUMNS = ("logical_call_id, run_id, tenant_id, principal_id, provider_call_id, operation_key, "
                "tool_name, tool_version, arguments_hash, state, version, reason, policy_version, "
                "worker_id, fence, attempts, receipt_id, result, compensates, unknown_since, updated_at")
EVENT_COLUMNS = ("position, event_id, event_type, topic, run_id, tenant_id, logical_call_id, "
                 "principal_id, policy_version, worker_id, fence, attempt, receipt_id, trace_id, "
                 "occurred_at, recorded_at, envelope -> 'payload' AS payload")

RUNS = Keyset("runs", (("run_id", "text"), ("tenant_id", "text")))
"""Two tenants may each have a run of one id: the tenant breaks the tie."""
CALLS = Keyset("calls", (("logical_call_id", "uuid"),))  # UUIDv7: creation order
TIMELINE = Keyset("timeline", (("position", "bigint"),))
RUN_CALLS_SHOWN = 100
UNKNOWN = Keyset("unknown", (("unknown_since", "timestamptz"), ("logical_call_id", "uuid")))


async def list_runs(conn: asyncpg.Connection, filters: RunFilters) -> Page[Run]:
    select = _common(filters, "updated_at")
    select.where_optional("status = ANY({}::text[])", filters.state)
    select.where_optional("EXISTS (SELECT 1 FROM projection.calls c WHERE c.run_id = runs.run_id "
                          "AND c.tenant_id = runs.tenant_id AND c.tool_name = {})", filters.tool)
    rows = await _page(conn, "projection.runs", RUN_COLUMNS, select, RUNS, filters.after, filters.limit)
    return Page[Run](items=[Run(**row) for row in rows[:filters.limit]],
                     next=RUNS.next_cursor(rows, filters.limit))


async def get_run(conn: asyncpg.Connection, run: RunKey) -> RunDetail | None:
    """The run and its first ``RUN_CALLS_SHOWN`` calls: a run may hold thousands, and one
    answer must stay small; ``more_calls`` continues through ``/v1/calls?tenant=&run=``."""
    row = await conn.fetchrow(f"SELECT {RUN_COLUMNS} FROM projection.runs"
                              " WHERE tenant_id = $1 AND run_id = $2", run.tenant_id, run.run_id)
    if row is None:
        return None
    select = _of_run(run)
    calls = await _page(conn, "projection.calls", CALL_COLUMNS, select, CALLS, None,
                        RUN_CALLS_SHOWN)
    return RunDetail(run=Run(**row), calls=[_call(Call, call) for call in calls[:RUN_CALLS_SHOWN]],
                     more_calls=CALLS.next_cursor(calls, RUN_CALLS_SHOWN))


async def timeline(conn: asyncpg.Connection, run: RunKey,
                   filters: TimelineFilters) -> Page[TimelineEvent] | None:
    """The run's events in history order; None when the caller sees neither run nor events."""
    select = _of_run(run)
    select.where_optional("occurred_at >= {}", filters.since)
    select.where_optional("occurred_at < {}", filters.until)
    select.where_optional("event_type = ANY({}::text[])", filters.event_type)
    rows = await _page(conn, "projection.events", EVENT_COLUMNS, select, TIMELINE, filters.after,
                       filters.limit)
    if not rows and filters.after is None and not await _run_visible(conn, run):
        return None
    items = [TimelineEvent(**{**row, "payload": json.loads(row["payload"] or "{}")})
             for row in rows[:filters.limit]]
    return Page[TimelineEvent](items=items, next=TIMELINE.next_cursor(rows, filters.limit))


async def list_calls(conn: asyncpg.Connection, filters: CallFilters, *,
                     within: tuple[str, ...] = ()) -> Page[Call]:
    """Calls by filter; ``within`` narrows to a fixed set of states (a queue's definition)."""
    select = _call_filters(filters, "updated_at", within)
    rows = await _page(conn, "projection.calls", CALL_COLUMNS, select, CALLS, filters.after,
                       filters.limit)
    return Page[Call](items=[_call(Call, row) for row in rows[:filters.limit]],
                      next=CALLS.next_cursor(rows, filters.limit))


async def get_call(conn: asyncpg.Connection, logical_call_id: uuid.UUID) -> Call | None:
    row = await conn.fetchrow(f"SELECT {CALL_COLUMNS} FROM projection.calls "
                              "WHERE logical_call_id = $1", logical_call_id)
    return None if row is None else _call(Call, row)


async def unknown_queue(conn: asyncpg.Connection, filters: CallFilters) -> Page[UnknownCall]:
    """Calls whose outcome nobody knows yet, oldest first, with their age."""
    select = _call_filters(filters, "unknown_since", UNKNOWN_STATES)
    select.where("unknown_since IS NOT NULL")
    columns = f"{CALL_COLUMNS}, extract(epoch FROM now() - unknown_since)::float8 AS age_seconds"
    rows = await _page(conn, "projection.calls", columns, select, UNKNOWN, filters.after, filters.limit)
    return Page[UnknownCall](items=[_call(UnknownCall, row) for row in rows[:filters.limit]],
                             next=UNKNOWN.next_cursor(rows, filters.limit))


async def compensations(conn: asyncpg.Connection, filters: CallFilters) -> Page[Compensation]:
    """Calls being (or that were) compensated, each with the calls compensating it."""
    page = await list_calls(conn, filters, within=COMPENSATION_STATES)
    ids = [call.logical_call_id for call in page.items]
    rows = await conn.fetch(f"SELECT {CALL_COLUMNS} FROM projection.calls "
                            "WHERE compensates = ANY($1::uuid[]) ORDER BY logical_call_id", ids)
    by_original: dict[uuid.UUID, list[Call]] = {}
    for row in rows:
        by_original.setdefault(row["compensates"], []).append(_call(Call, row))
    items = [Compensation(**call.model_dump(), compensating_calls=by_original.get(call.logical_call_id, []))
             for call in page.items]
    return Page[Compensation](items=items, next=page.next)


def _common(filters: RunFilters, time_column: str) -> Select:
    select = Select()
    select.where_optional("tenant_id = {}", filters.tenant)
    select.where_optional("principal_id = {}", filters.principal)
    select.where_optional(f"{time_column} >= {{}}", filters.since)
    select.where_optional(f"{time_column} < {{}}", filters.until)
    return select


def _call_filters(filters: CallFilters, time_column: str, within: tuple[str, ...]) -> Select:
    select = _common(filters, time_column)
    select.where_optional("tool_name = {}", filters.tool)
    select.where_optional("run_id = {}", filters.run)
    select.where_optional("state = ANY({}::text[])", filters.state)
    select.where_optional("state = ANY({}::text[])", list(within))
    return select


async def _page(conn: asyncpg.Connection, table: str, columns: str, select: Select, keyset: Keyset,
                after: str | None, limit: int) -> list[asyncpg.Record]:
    """One row more than the page, so the cursor knows whether another page exists."""
    keyset.start_after(select, after)
    limit_param = select.param(limit + 1)
    return await conn.fetch(f"SELECT {columns} FROM {table} {select.sql()} {keyset.order_by()} "
                            f"LIMIT {limit_param}", *select.args)


def _of_run(run: RunKey) -> Select:
    select = Select()
    select.where("tenant_id = {}", run.tenant_id)
    select.where("run_id = {}", run.run_id)
    return select


async def _run_visible(conn: asyncpg.Connection, run: RunKey) -> bool:
    return await conn.fetchval("SELECT EXISTS (SELECT 1 FROM projection.runs"
                               " WHERE tenant_id = $1 AND run_id = $2)", run.tenant_id, run.run_id)


def _call(model: type[Call], row: asyncpg.Record) -> Call:
    """jsonb arrives as text (no codec on the pool): the result is parsed here."""
    fields = dict(row)
    fields["result"] = None if fields["result"] is None else json.loads(fields["result"])
    return model(**fields)
