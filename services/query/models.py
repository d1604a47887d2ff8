"""What the query API answers, as pydantic models: the handlers serialise them and the OpenAPI
document's schemas are generated from them, so the two cannot drift apart."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, Field

T = TypeVar("T")


class Run(BaseModel):
    run_id: str
    tenant_id: str
    principal_id: str
    status: str
    calls: int = Field(description="How many intents the run has.")
    stop_reason: str | None
    updated_at: datetime


class Call(BaseModel):
    """One intent at the highest version the projection has seen."""

    logical_call_id: uuid.UUID
    run_id: str
    tenant_id: str
    principal_id: str
    provider_call_id: str | None
    operation_key: str | None
    tool_name: str | None
    tool_version: str | None
    arguments_hash: str | None
    state: str
    version: int
    reason: str | None
    policy_version: str | None
    worker_id: str | None
    fence: int | None
    attempts: int
    receipt_id: str | None
    result: Any = Field(default=None, description="Parsed result fields; untrusted tool output.")
    compensates: uuid.UUID | None = Field(description="The call this one compensates, if any.")
    unknown_since: datetime | None
    updated_at: datetime


class UnknownCall(Call):
    age_seconds: float = Field(description="Seconds since the call became UNKNOWN.")


class Compensation(Call):
    compensating_calls: list[Call] = Field(description="Calls whose `compensates` is this call.")


class RunDetail(BaseModel):
    run: Run
    calls: list[Call] = Field(description="The run's first 100 calls, oldest first.")
    more_calls: str | None = Field(default=None, description=(
        "Set when the run has more calls than shown: the cursor of "
        "``/v1/calls?run=<run_id>&after=<more_calls>``, which pages through the rest."))


class TimelineEvent(BaseModel):
    """One event of the history with the audit fields of docs/design.md §5 invariant 11."""

    position: int = Field(description="Order of arrival in the history; the timeline's order.")
    event_id: uuid.UUID
    event_type: str
    topic: str
    run_id: str
    tenant_id: str | None
    logical_call_id: uuid.UUID | None
    principal_id: str | None
    policy_version: str | None
    worker_id: str | None
    fence: int | None
    attempt: int | None
    receipt_id: str | None
    trace_id: str | None
    occurred_at: datetime
    recorded_at: datetime
    payload: dict[str, Any] = Field(description="The event's payload as recorded.")


class DeadLetter(BaseModel):
    schema_name: str = Field(description="The service schema whose consumer dead-lettered it.")
    id: int
    consumer: str
    topic: str
    kafka_partition: int
    kafka_offset: int
    event_id: uuid.UUID | None
    reason: str
    headers: dict[str, str]
    value_base64: str | None = Field(description="The record's original bytes, base64.")
    created_at: datetime
    replayed_at: datetime | None


class Counts(BaseModel):
    """How many runs are in each status and calls in each state, now."""

    runs: dict[str, int]
    calls: dict[str, int]


class Point(BaseModel):
    at: datetime = Field(description="Start of the bucket (or the sampling instant).")
    value: float


class Series(BaseModel):
    name: str = Field(description="relay_backlog, consumer_lag, retry_amplification, "
                                  "duplicates_prevented or compensations.")
    subject: str = Field(description="What the series is of: an outbox schema, a consumer "
                                     "group, an event type, a compensation outcome, or `all`.")
    unit: str
    points: list[Point] = Field(description="Oldest first; a missing bucket means no data.")


class HealthReport(BaseModel):
    """The pipeline over the last hour: sampled positions and rates from the event history."""

    window_s: int
    bucket_s: int = Field(description="Width of the buckets of the history-derived series.")
    series: list[Series]


class Page(BaseModel, Generic[T]):
    items: list[T]
    next: str | None = Field(description="Pass as `after` for the next page; null on the last.")


class ErrorDetail(BaseModel):
    code: str = Field(description="Machine-readable: unauthenticated, operator_only, not_found, "
                                  "invalid_parameter, invalid_cursor, unavailable, internal.")
    message: str


class ErrorBody(BaseModel):
    error: ErrorDetail


class Health(BaseModel):
    status: str
