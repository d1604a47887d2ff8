"""Operator commands (``intentledger runs|unknown|dlq``): the database read directly with an
operator's access, through the same query functions as the API; aligned columns for people,
``--json`` for scripts."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any

import asyncpg
from pydantic import BaseModel

from services.query import reads
from services.query.access import OPERATOR_ACCESS, scoped
from services.query.dead_letters import list_dead_letters, replay
from services.query.errors import QueryError
from services.query.filters import (MAX_PAGE, CallFilters, DeadLetterFilters, RunFilters,
                                    TimelineFilters)
from services.query.models import TimelineEvent
from services.query.tables import age, render
from services.query.settings import QuerySettings
from shared.config import Settings
from shared.runs import RunKey
from shared.terminal import printable
from shared.db.pool import open_pool
from shared.tools import Rejection, load_registry

NOT_MIGRATED = (asyncpg.InvalidParameterValueError, asyncpg.UndefinedTableError,
                asyncpg.UndefinedFunctionError, asyncpg.InvalidSchemaNameError)


async def runs_list(settings: Settings, filters: RunFilters, as_json: bool) -> int:
    async with _operator(settings) as conn:
        page = await reads.list_runs(conn, filters)
    _print_page(page, as_json, ("run_id", "tenant_id", "principal_id", "status", "calls",
                                "stop_reason", "updated_at"))
    return 0


async def runs_show(settings: Settings, run: RunKey, as_json: bool) -> int:
    """The run, its calls and its whole timeline: who, under which policy, which worker and
    fence, which attempt, which receipt (docs/design.md §5 invariant 11). A run is named by
    its tenant and id: two tenants may each have a run of one id."""
    async with _operator(settings) as conn:
        detail = await reads.get_run(conn, run)
        if detail is not None and detail.more_calls:
            detail.calls.extend(await _remaining_calls(conn, run, detail.more_calls))
        events = await _whole_timeline(conn, run)
    if detail is None and not events:
        print(f"intentledger: run {printable(run.run_id)} of tenant {printable(run.tenant_id)} "
              "not found", file=sys.stderr)
        return 1
    contracts = _contracts(detail.calls if detail else [])
    if as_json:
        print(json.dumps({"run": _dump(detail.run) if detail else None,
                          "calls": [_dump(call) for call in detail.calls] if detail else [],
                          "tools": contracts,
                          "timeline": [_dump(event) for event in events]}, indent=2))
        return 0
    if detail:
        print(render([_dump(detail.run)], ("run_id", "tenant_id", "principal_id", "status", "calls",
                                           "stop_reason", "updated_at")))
        print("\ncalls\n" + render([_dump(call) for call in detail.calls], (
            "logical_call_id", "tool_name", "state", "attempts", "policy_version", "worker_id",
            "fence", "receipt_id", "operation_key")))
        print("\ntools (from the registry)\n" + render(contracts, (
            "tool", "effect", "replay_safe", "key_retention_s", "attempt_timeout_s",
            "reconciliation", "server_errors", "compensated_by")))
    print("\ntimeline\n" + render([_dump(event) for event in events], (
        "position", "occurred_at", "event_type", "logical_call_id", "principal_id",
        "policy_version", "worker_id", "fence", "attempt", "receipt_id", "trace_id")))
    return 0


def _contracts(calls: Sequence[Any]) -> list[dict[str, Any]]:
    """Each tool's contract: which effects may repeat, what a timeout means for it, how an
    unknown outcome is settled (questions 2 and 3 an operator asks of any effect)."""
    registry = load_registry(QuerySettings().tools_file)
    rows = []
    for name, version in sorted({(call.tool_name, call.tool_version) for call in calls
                                 if call.tool_name}):
        try:
            tool = registry.resolve(name, version)
        except Rejection:
            rows.append({"tool": f"{name} v{version}", "effect": "not in this registry"})
            continue
        compensation = tool.compensating_tool
        rows.append({"tool": f"{name} v{version}", "effect": tool.effect,
                     "replay_safe": tool.retry.replay_safe,
                     "key_retention_s": tool.retry.key_retention_seconds,
                     "attempt_timeout_s": tool.retry.attempt_timeout_seconds,
                     "reconciliation": tool.reconciliation,
                     "server_errors": tool.retry.server_errors,
                     "compensated_by": f"{compensation.name} v{compensation.version}"
                     if compensation else None})
    return rows


async def unknown_list(settings: Settings, filters: CallFilters, as_json: bool) -> int:
    async with _operator(settings) as conn:
        page = await reads.unknown_queue(conn, filters)
    _print_page(page, as_json, ("logical_call_id", "run_id", "tenant_id", "tool_name", "state",
                                "age", "unknown_since", "attempts", "operation_key"),
                shown=lambda call: {"age": age(call.age_seconds)})
    return 0


async def dlq_list(settings: Settings, filters: DeadLetterFilters, as_json: bool) -> int:
    async with _operator(settings) as conn:
        page = await list_dead_letters(conn, filters)
    _print_page(page, as_json, ("schema_name", "id", "created_at", "topic", "kafka_partition",
                                "kafka_offset", "consumer", "replayed_at", "reason"))
    return 0


async def dlq_replay(settings: Settings, schema: str, id_: int, force: bool) -> int:
    pool = await open_pool(settings.endpoints.database_url, application_name="intentledger-cli",
                           max_size=1)
    try:
        async with pool.acquire() as conn:
            replayed = await replay(conn, settings.endpoints.kafka_bootstrap, schema, id_, force=force)
    except QueryError as refusal:
        print(f"intentledger: {printable(refusal.message)}", file=sys.stderr)
        return 1
    finally:
        await pool.close()
    print(f"replayed {schema}.dead_letters #{id_} to {replayed.topic}[{replayed.kafka_partition}]")
    return 0


@asynccontextmanager
async def _operator(settings: Settings) -> AsyncIterator[asyncpg.Connection]:
    pool = await open_pool(settings.endpoints.database_url, application_name="intentledger-cli",
                           max_size=1)
    try:
        async with scoped(pool, OPERATOR_ACCESS) as conn:
            yield conn
    except NOT_MIGRATED as missing:
        raise SystemExit(f"intentledger: {missing} (run `intentledger migrate`)") from None
    finally:
        await pool.close()


async def _whole_timeline(conn: asyncpg.Connection, run: RunKey) -> list[TimelineEvent]:
    events: list[TimelineEvent] = []
    after = None
    while True:
        page = await reads.timeline(conn, run, TimelineFilters(limit=MAX_PAGE, after=after))
        if page is None:
            return events
        events += page.items
        if (after := page.next) is None:
            return events


async def _remaining_calls(conn: asyncpg.Connection, run: RunKey, after: str) -> list[Any]:
    """The calls after the first page of a run's detail: an operator reads them all."""
    calls: list[Any] = []
    cursor: str | None = after
    while cursor:
        page = await reads.list_calls(conn, CallFilters(tenant=run.tenant_id, run=run.run_id,
                                                        after=cursor, limit=MAX_PAGE))
        calls += page.items
        cursor = page.next
    return calls


def _print_page(page: Any, as_json: bool, columns: Sequence[str],
                shown: Callable[[Any], dict[str, Any]] = lambda _: {}) -> None:
    """``shown`` adds columns computed for people (an age in words) to each item's fields."""
    if as_json:
        print(json.dumps({"items": [_dump(item) for item in page.items], "next": page.next}, indent=2))
        return
    print(render([_dump(item) | shown(item) for item in page.items], columns))
    if page.next:
        print(f"\nmore: --after {page.next}")


def _dump(model: BaseModel) -> dict[str, Any]:
    return model.model_dump(mode="json")
