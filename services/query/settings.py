"""Query API configuration, from ``INTENTLEDGER_QUERY_*`` environment variables."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

OPERATOR = "*"
"""The tenant an operator key maps to: every tenant, and the dead letters."""


class QuerySettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="INTENTLEDGER_QUERY_", extra="ignore")

    host: str = "127.0.0.1"
    """Loopback unless the deployment's network policy decides who may reach the API."""
    port: int = Field(default=8090, ge=0, le=65535)
    api_keys: dict[str, str] = Field(default={}, repr=False)
    """JSON ``{"<key>": "<tenant id>" | "*"}``; ``*`` is an operator key. No keys: every data
    request is refused (fail closed)."""
    tools_file: Path = Path(__file__).resolve().parents[2] / "config" / "tools.example.yaml"
    """The deployment's tool registry: ``runs show`` prints each tool's contract from it (which
    effects may repeat, what a timeout means)."""
    statement_timeout_ms: int = Field(default=10_000, ge=1)
    """A request's queries stop after this, so one heavy filter cannot hold a connection."""
