"""Dispatcher configuration, from ``INTENTLEDGER_DISPATCHER_*`` environment variables."""

from __future__ import annotations

import os
import socket
import uuid
from pathlib import Path

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

from shared.identity.signatures import SigningKey, load_signing_key, parse_signing_key
from shared.topology import (AGENT_RESULTS, EFFECT_RECEIPTS, LEDGER_AUTHORIZATIONS,
                             LEDGER_COMPENSATIONS, LEDGER_DISPATCH, LEDGER_EFFECTS,
                             LEDGER_RESOLUTIONS)

_CONFIG = Path(__file__).resolve().parents[2] / "config"


def _worker_id() -> str:
    """New on every start: a restarted process is a new owner and must take leases over."""
    return f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"


class DispatcherSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="INTENTLEDGER_DISPATCHER_", extra="ignore")

    tools_file: Path = _CONFIG / "tools.example.yaml"
    """The same registry the intake reads."""
    policy_file: Path = _CONFIG / "policy.example.yaml"
    """The same policy file the policy service reads: a capability issued under an older
    version is re-evaluated under the current one before dispatch."""
    policy_reload_interval_s: float = Field(default=2.0, gt=0)
    principals_file: Path = _CONFIG / "principals.example.yaml"
    """Whose signed resolutions are applied (docs/identity.md): an operator's key and role are
    read here; re-read every ``principals_reload_interval_s``. The default is the example file,
    whose private keys nobody has: until a deployment sets its own, no resolution is applied."""
    principals_reload_interval_s: float = Field(default=5.0, gt=0)
    principal_id: str = "dispatcher"
    """The dispatcher's own principal in the principals file (kind service, role
    ``compensator``): what it seals its compensation proposals as."""
    signing_key_file: Path | None = None
    """That principal's private JWK; or ``signing_key``, the JWK's JSON itself. Required when
    the registry declares a compensatable tool: without it no compensation can be authorized."""
    signing_key: SecretStr | None = Field(default=None, repr=False)
    worker_id: str = Field(default_factory=_worker_id)
    authorizations_topic: str = LEDGER_AUTHORIZATIONS
    dispatch_topic: str = LEDGER_DISPATCH
    """Where the call's lifecycle events go (the projection reads them)."""
    effects_topic: str = LEDGER_EFFECTS
    """⚑ Committed effects, for any subscriber."""
    resolutions_topic: str = LEDGER_RESOLUTIONS
    """Operators' resolutions (``intentledger resolve``)."""
    compensations_topic: str = LEDGER_COMPENSATIONS
    """Where compensations are proposed to the policy."""
    reply_topic: str = EFFECT_RECEIPTS
    """Named in every Kafka effect request; downstreams answer there."""
    results_family: str = AGENT_RESULTS
    """Where settled calls are announced to the agents that proposed them: tenant T's on topic
    ``<results_family>.T``, as the intake's answers (``shared.topology.results_topic``)."""
    lease_ttl_s: float = Field(default=10.0, gt=0)
    """A worker holds a run this long after its last step; a dead worker's runs are taken over
    after at most this."""
    recovery_reserve_s: float = Field(default=5.0, ge=0)
    """Attempts stop this long before the run deadline, leaving time to reconcile."""
    min_attempt_s: float = Field(default=0.2, gt=0)
    """An attempt with less time than this is not started (it could only time out)."""
    lookup_timeout_s: float = Field(default=5.0, gt=0)
    max_lookups: int = Field(default=5, ge=1)
    """Reconciliation budget: lookups without an answer before a person is asked."""
    lookup_backoff_s: float = Field(default=1.0, gt=0)
    """Pause after the first unanswered lookup, doubled after each one."""
    clock_skew_grace_s: float = Field(default=1.0, ge=0)
    """Reconciliation waits this long past the last attempt's deadline: the downstream checks
    deadlines with its own clock."""
    reconciliation_window_s: float = Field(default=300.0, gt=0)
    """How long past an UNKNOWN outcome (even past the run deadline) its run keeps an owner."""
    compensation_window_s: float = Field(default=600.0, gt=0)
    """A compensation's own deadline, from when it is requested."""
    breaker_failures: int = Field(default=5, ge=1)
    breaker_cooldown_s: float = Field(default=5.0, gt=0)
    default_run_attempts: int = Field(default=20, ge=1)
    """A run's attempt budget when its intent states none."""
    concurrency: int = Field(default=8, ge=1)
    """Transactions stepping calls at once in this process."""
    steps_per_transaction: int = Field(default=50, ge=1)
    """Due calls one transaction claims (at most one per run) and steps, each in a savepoint
    of its own: one commit, one claim and one read of leases, runs, attempts and resolutions for
    many steps, where a step alone was a dozen short statements."""
    scan_interval_s: float = Field(default=0.5, gt=0)
    batch_size: int = Field(default=200, ge=1)
    audit_interval_s: float | None = Field(default=3600.0, gt=0)
    """How often the settled-call audit runs over the tools that declare an ``audit_url``
    (``audit/findings.py``); null: never (``intentledger audit`` still can)."""
    audit_lookback_s: float = Field(default=7200.0, gt=0)
    """The window each round audits: calls settled, and effects applied, this long before…"""
    audit_settle_s: float = Field(default=300.0, ge=0)
    """…this long ago: a call settling right now is not drift."""
    faults: str = ""

    @property
    def key(self) -> SigningKey | None:
        if self.signing_key is not None and self.signing_key.get_secret_value():
            return parse_signing_key(self.signing_key.get_secret_value(),
                                     "INTENTLEDGER_DISPATCHER_SIGNING_KEY")
        return load_signing_key(self.signing_key_file) if self.signing_key_file else None
