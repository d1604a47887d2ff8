"""Settings every process reads, from the environment first.

Every value has an ``INTENTLEDGER_`` environment variable so an existing Kafka or
PostgreSQL (or a Kubernetes Secret) replaces the local infrastructure without code changes.
When ``INTENTLEDGER_KAFKA_BOOTSTRAP`` / ``INTENTLEDGER_DATABASE_URL`` are unset, the
endpoints written by ``intentledger infra up`` into ``<home>/infra.json`` are used.
"""

from __future__ import annotations

import json
from functools import cached_property
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict


class Endpoints(BaseModel):
    kafka_bootstrap: str
    database_url: str


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="INTENTLEDGER_", extra="ignore")

    home: Path = Path(".intentledger")
    """Project-local folder for infrastructure state, data directories and logs."""
    cache_dir: Path = Path.home() / ".cache" / "intentledger"
    """Survives fresh clones: the Kafka jar set resolved by Maven lives here."""

    kafka_bootstrap: str | None = None
    database_url: str | None = None

    kafka_version: str = "4.1.1"
    kafka_port: int = 19092
    kafka_controller_port: int = 19093
    postgres_port: int = 55432
    database_name: str = "intentledger"
    postgres_fast: bool = False
    """Benchmarks only: fsync and synchronous_commit off, so a crash may lose commits."""
    capability_signing_key: SecretStr | None = None
    """The policy's private Ed25519 JWK (its JSON) that signs capabilities; the policy's alone."""
    capability_signing_key_file: Path | None = None
    """The same, from a file (e.g. a mounted Kubernetes Secret)."""
    capability_public_keys_file: Path | None = None
    """A JWKS of the policy's public keys, by kid: what the dispatcher and the downstreams
    verify capabilities with. List the old and the new key while rotating."""
    dev_mode: bool = False
    """Local runs only: without keys configured, generate a development capability key under
    ``<home>/identity`` (logged as a warning) instead of refusing to start."""
    infra_mode: Literal["auto", "local", "docker"] = "auto"
    """How ``infra up`` runs services: ``auto`` uses Docker when a daemon answers, else local processes."""

    @property
    def logs_dir(self) -> Path:
        return self.home / "logs"

    @property
    def infra_state_file(self) -> Path:
        return self.home / "infra.json"

    @cached_property
    def endpoints(self) -> Endpoints:
        """Explicit environment wins; otherwise what ``infra up`` recorded."""
        kafka, database = self._endpoint("kafka_bootstrap"), self._endpoint("database_url")
        missing = [name for name, value in (("INTENTLEDGER_KAFKA_BOOTSTRAP", kafka),
                                            ("INTENTLEDGER_DATABASE_URL", database)) if not value]
        if missing:
            raise RuntimeError(
                f"no endpoint for {', '.join(missing)}: run `intentledger infra up` "
                "or set the variable to an existing service"
            )
        return Endpoints(kafka_bootstrap=kafka, database_url=database)

    @cached_property
    def kafka_endpoint(self) -> str:
        """Kafka's bootstrap alone, for a process that has no database (the MCP gateway)."""
        if not (kafka := self._endpoint("kafka_bootstrap")):
            raise RuntimeError("no endpoint for INTENTLEDGER_KAFKA_BOOTSTRAP: run `intentledger "
                               "infra up` or set the variable to an existing service")
        return kafka

    def _endpoint(self, name: str) -> str | None:
        if value := getattr(self, name):
            return value
        if self.infra_state_file.exists():
            return json.loads(self.infra_state_file.read_text()).get("endpoints", {}).get(name)
        return None
