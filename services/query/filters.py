"""The filters every listing accepts, as pydantic models: the HTTP API validates query strings
with them, the CLI builds them from its options, and the OpenAPI parameters come from them."""

from __future__ import annotations

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

MAX_PAGE = 1000


class PageParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    limit: int = Field(default=50, ge=1, le=MAX_PAGE, description="Items per page.")
    after: str | None = Field(default=None, description="The `next` cursor of the previous page.")


class TimeRange(PageParams):
    since: AwareDatetime | None = Field(default=None, description="Inclusive lower bound (RFC 3339).")
    until: AwareDatetime | None = Field(default=None, description="Exclusive upper bound (RFC 3339).")


class RunFilters(TimeRange):
    """Time bounds apply to ``updated_at``."""

    tenant: str | None = Field(default=None, description="Tenant id (a tenant key sees its own only).")
    principal: str | None = Field(default=None, description="Principal id.")
    tool: str | None = Field(default=None, description="Tool name (runs: with a call of this tool).")
    state: list[str] = Field(default=[], description="Run status; repeat for several.")


class CountFilters(BaseModel):
    model_config = ConfigDict(extra="forbid")

    tenant: str | None = Field(default=None, description="Tenant id (a tenant key sees its own only).")


class CallFilters(RunFilters):
    """Time bounds apply to ``updated_at`` (``unknown_since`` in the UNKNOWN queue)."""

    run: str | None = Field(default=None, description="Run id.")
    state: list[str] = Field(default=[], description="Call state; repeat for several.")


RUN_TENANT = Field(default=None, description=(
    "The run's tenant: run ids are chosen by each tenant's agents, so a run is named by tenant "
    "and id. Required with an operator key (400 `tenant_required` without it); a tenant key "
    "names its own tenant, and any other answers 404."))


class RunScope(BaseModel):
    """Which tenant's run of the id in the path."""

    model_config = ConfigDict(extra="forbid")

    tenant: str | None = RUN_TENANT


class TimelineFilters(TimeRange):
    """Time bounds apply to ``occurred_at``."""

    tenant: str | None = RUN_TENANT
    event_type: list[str] = Field(default=[], description="Event type; repeat for several.")


class DeadLetterFilters(TimeRange):
    """Time bounds apply to ``created_at``."""

    schema_name: str | None = Field(default=None, description="One service schema.")
    topic: str | None = Field(default=None, description="The topic the record was consumed from.")
