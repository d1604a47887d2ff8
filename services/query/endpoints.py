"""The query API's endpoints, declared once: the HTTP router and the OpenAPI document are
both built from this table, so neither can list a route the other lacks."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from services.query import health, reads
from services.query.dead_letters import list_dead_letters
from services.query.filters import (CallFilters, CountFilters, DeadLetterFilters, RunFilters,
                                    RunScope, TimelineFilters)
from services.query.models import (Call, Compensation, Counts, DeadLetter, HealthReport, Page, Run,
                                   RunDetail, TimelineEvent, UnknownCall)
from shared.runs import RunKey

Read = Callable[..., Awaitable[BaseModel | None]]


@dataclass(frozen=True)
class Endpoint:
    path: str
    """aiohttp's pattern, which is also OpenAPI's: ``{name}`` marks a path parameter."""
    operation_id: str
    summary: str
    response: type[BaseModel]
    read: Read
    """``read(conn, filters_or_None, **path_parameters)``; None answers 404."""
    filters: type[BaseModel] | None = None
    path_parameters: dict[str, type] = field(default_factory=dict)
    operator_only: bool = False
    run_scoped: bool = False
    """The path names a run by id: its tenant comes from ``?tenant=`` or the caller's key and
    is passed to ``read`` as ``tenant`` (``access.run_tenant``)."""


def _no_filters(read: Callable[..., Awaitable[Any]]) -> Read:
    return lambda conn, _filters, **path: read(conn, **path)


ENDPOINTS = (
    Endpoint("/v1/runs", "listRuns", "Runs, ordered by run id.", Page[Run],
             reads.list_runs, RunFilters),
    Endpoint("/v1/runs/{run_id}", "getRun", "One tenant's run of this id, and its calls.",
             RunDetail, lambda conn, _filters, run_id, tenant: reads.get_run(
                 conn, RunKey(tenant, run_id)),
             RunScope, path_parameters={"run_id": str}, run_scoped=True),
    Endpoint("/v1/runs/{run_id}/timeline", "getRunTimeline",
             "One tenant's run's events in history order, with the audit fields of every effect "
             "(principal, tenant, policy version, worker, fence, attempt, receipt, trace).",
             Page[TimelineEvent], lambda conn, filters, run_id, tenant: reads.timeline(
                 conn, RunKey(tenant, run_id), filters),
             TimelineFilters, path_parameters={"run_id": str}, run_scoped=True),
    Endpoint("/v1/calls", "listCalls", "Logical calls, oldest first (UUIDv7 order).", Page[Call],
             reads.list_calls, CallFilters),
    Endpoint("/v1/calls/{logical_call_id}", "getCall", "One intent.", Call,
             _no_filters(reads.get_call), path_parameters={"logical_call_id": uuid.UUID}),
    Endpoint("/v1/unknown", "listUnknown",
             "The UNKNOWN queue: calls in UNKNOWN or RECONCILING, oldest first, with their age.",
             Page[UnknownCall], reads.unknown_queue, CallFilters),
    Endpoint("/v1/manual-review", "listManualReview", "Calls waiting in MANUAL_REVIEW.", Page[Call],
             lambda conn, filters: reads.list_calls(conn, filters, within=("MANUAL_REVIEW",)),
             CallFilters),
    Endpoint("/v1/compensations", "listCompensations",
             "Calls in COMPENSATING, COMPENSATED or COMPENSATION_FAILED with their compensating calls.",
             Page[Compensation], reads.compensations, CallFilters),
    Endpoint("/v1/counts", "getCounts", "Runs per status and calls per state, now.", Counts,
             health.counts, CountFilters),
    Endpoint("/v1/health", "getPipelineHealth",
             "The last hour of relay backlog and consumer lag (sampled), retry amplification, "
             "duplicates prevented and compensation outcomes (operator keys only).",
             HealthReport, health.health, operator_only=True),
    Endpoint("/v1/dead-letters", "listDeadLetters",
             "Dead letters of every service schema (operator keys only).", Page[DeadLetter],
             list_dead_letters, DeadLetterFilters, operator_only=True),
)
