"""Intake configuration, from ``INTENTLEDGER_INTAKE_*`` environment variables."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from services.proposal_intake.limits import Limits
from shared.topology import AGENT_PROPOSALS, AGENT_RESULTS, LEDGER_INTAKE


class TenantLimits(BaseModel):
    """A tenant's ceilings for its runs: what a run gets when its first proposal states
    nothing, and the most it gets when it states more."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_calls: int | None = Field(default=None, ge=1)
    max_attempts: int | None = Field(default=None, ge=1)
    run_seconds: float | None = Field(default=None, gt=0)
    cost_limit_minor: int | None = Field(default=None, ge=0)
    currency: str | None = Field(default=None, pattern=r"^[A-Z]{3}$")
    calls_per_second: float | None = Field(default=None, gt=0)
    """The tenant's proposal rate (``rates.py``), in calls across all its principals."""
    calls_burst: float | None = Field(default=None, ge=1)
    principal_calls_per_second: float | None = Field(default=None, gt=0)
    """Each of the tenant's principals' own rate, within the tenant's."""
    principal_calls_burst: float | None = Field(default=None, ge=1)


class IntakeSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="INTENTLEDGER_INTAKE_", extra="ignore")

    tools_file: Path = Path(__file__).resolve().parents[2] / "config" / "tools.example.yaml"
    """The deployment's tool registry; a proposal for a tool not declared there is refused.
    The default is the example registry of the source tree; deployments set their own."""
    principals_file: Path = Path(__file__).resolve().parents[2] / "config" / "principals.example.yaml"
    """Who may propose, for which tenants, with which public keys (docs/identity.md); re-read
    every ``principals_reload_interval_s``. The default is the example file, whose private keys
    nobody has: until a deployment sets its own, no proposal verifies."""
    principals_reload_interval_s: float = Field(default=5.0, gt=0)
    unsigned_tenants: frozenset[str] = frozenset()
    """DEVELOPMENT ONLY: tenants whose proposals may come unsigned, taking the principal named
    in the body on trust (any Kafka user that can write the topic can then act for them).
    Logged as a warning at start; a signed record is verified whatever its tenant."""
    default_max_calls: int = Field(default=100, ge=1)
    """The calls a run may hold, for a tenant without its own ceiling."""
    default_max_attempts: int | None = Field(default=None, ge=1)
    """The send attempts a run may make, across its calls; unset, ``attempts_per_call`` times
    its call budget (a fixed 5 used to stop a run of calls that all succeeded at its sixth)."""
    attempts_per_call: int = Field(default=2, ge=1)
    """A derived attempt budget allows this many attempts per call of the run's budget: each
    call may succeed first time, and half of them may be retried once, on average."""
    default_run_seconds: float = Field(default=3600.0, gt=0)
    """A run ends at most this long after its first proposal (it may state an earlier end)."""
    tenant_calls_per_second: float = Field(default=100.0, gt=0)
    """A tenant's proposal rate, in calls per second across its principals (``rates.py``),
    unless its ``tenant_limits`` say otherwise; refused beyond it: ``proposal_rate_exceeded``."""
    tenant_calls_burst: float = Field(default=1000.0, ge=1)
    """How many calls a tenant may send at once after a quiet spell."""
    principal_calls_per_second: float = Field(default=20.0, gt=0)
    """One principal's (one agent's) rate: an agent in a loop is stopped long before its
    tenant's other agents feel it."""
    principal_calls_burst: float = Field(default=200.0, ge=1)
    tenant_limits: dict[str, TenantLimits] = {}
    """Per-tenant ceilings, e.g. ``{"acme": {"max_calls": 20, "run_seconds": 600}}``: a
    proposal may state lower limits for its run, never higher."""
    limits: Limits = Limits()
    batch_size: int = Field(default=200, ge=1)
    key_expiry_interval_s: float = Field(default=60.0, gt=0)
    """How often intents past their tool's ``ledger_key_retention_seconds`` are reduced to
    key tombstones (``expiry.py``), ``key_expiry_batch`` per transaction."""
    key_expiry_batch: int = Field(default=1000, ge=1)
    proposals_topic: str = AGENT_PROPOSALS
    results_family: str = AGENT_RESULTS
    """Where agents read their answers (one per proposed call): tenant T's on topic
    ``<results_family>.T`` (``shared.topology.results_topic``)."""
    intake_topic: str = LEDGER_INTAKE
    """Where the ledger's intake events go: the policy's ``intake_topic``."""
