"""Policy configuration, from ``INTENTLEDGER_POLICY_*`` environment variables."""

from __future__ import annotations

from pathlib import Path

from pydantic import AliasChoices, Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from shared.topology import (AGENT_RESULTS, LEDGER_APPROVALS, LEDGER_AUTHORIZATIONS,
                             LEDGER_COMPENSATIONS, LEDGER_INTAKE, LEDGER_RESOLUTIONS)

_CONFIG = Path(__file__).resolve().parents[2] / "config"


class PolicySettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="INTENTLEDGER_POLICY_", extra="ignore",
                                      populate_by_name=True)

    policy_file: Path = _CONFIG / "policy.example.yaml"
    """The deployment's policy; re-read every ``reload_interval_s`` (a bad edit is refused and
    the version in force stays). The default is the example of the source tree."""
    tools_file: Path = Field(default=_CONFIG / "tools.example.yaml", validation_alias=AliasChoices(
        "tools_file", "INTENTLEDGER_POLICY_TOOLS_FILE", "INTENTLEDGER_INTAKE_TOOLS_FILE"))
    """The tool registry amounts are read with; the intake's registry unless set apart."""
    reload_interval_s: float = Field(default=5.0, gt=0)
    principals_file: Path = _CONFIG / "principals.example.yaml"
    """Whose signed approvals count (docs/identity.md): an approver's key and role are read
    here; re-read every ``principals_reload_interval_s``. The default is the example file, whose
    private keys nobody has: until a deployment sets its own, no approval counts."""
    principals_reload_interval_s: float = Field(default=5.0, gt=0)
    sweep_interval_s: float = Field(default=5.0, gt=0)
    """How often lapsed approval requests are looked for (and denied)."""
    batch_size: int = Field(default=200, ge=1)
    intake_topic: str = LEDGER_INTAKE
    approvals_topic: str = LEDGER_APPROVALS
    compensations_topic: str = LEDGER_COMPENSATIONS
    authorizations_topic: str = LEDGER_AUTHORIZATIONS
    resolutions_topic: str = LEDGER_RESOLUTIONS
    """Where operators' run cancellations arrive (the dispatcher's ``resolutions_topic``)."""
    results_family: str = AGENT_RESULTS
    """Where a denial or an approval request is told to the agent: on topic
    ``<results_family>.<tenant>`` of the call's tenant, where the intake answered it."""
