"""Intake configuration, from ``INTENTLEDGER_INTAKE_*`` environment variables."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from services.proposal_intake.limits import Limits


class IntakeSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="INTENTLEDGER_INTAKE_", extra="ignore")

    tools_file: Path = Path(__file__).resolve().parents[2] / "config" / "tools.example.yaml"
    """The deployment's tool registry; a proposal for a tool not declared there is refused.
    The default is the example registry of the source tree; deployments set their own."""
    default_max_calls: int = Field(default=100, ge=1)
    default_max_attempts: int = Field(default=5, ge=1)
    default_run_seconds: float = Field(default=3600.0, gt=0)
    """A run without a stated deadline ends this long after its first proposal."""
    limits: Limits = Limits()
    batch_size: int = Field(default=200, ge=1)
