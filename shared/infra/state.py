"""The infrastructure state file, ``<home>/infra.json``.

It is the only memory ``up``/``down``/``status`` share between processes: which pid runs
which service, on which ports, with which Kafka cluster id, and the endpoints every service
reads through ``Settings.endpoints``. The top-level ``endpoints`` key is that contract.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

Mode = Literal["local", "docker", "external"]
LOCK = ".infra.lock"


class ServiceState(BaseModel):
    mode: Mode = "local"
    pid: int | None = None
    container_id: str | None = None
    ports: dict[str, int] = Field(default_factory=dict)
    """The ports chosen at the first ``up``; later starts reuse them so endpoints stay put."""
    endpoint: str | None = None


class InfraState(BaseModel):
    endpoints: dict[str, str] = Field(default_factory=dict)
    """``kafka_bootstrap`` and ``database_url``; written only once both answered."""
    kafka: ServiceState = Field(default_factory=ServiceState)
    postgres: ServiceState = Field(default_factory=ServiceState)
    kafka_cluster_id: str | None = None
    kafka_secure: bool = False
    """The broker authenticates and authorizes (``infra up --secure``); fixed when its data
    directory is formatted, as its users and ACLs live there."""

    @classmethod
    def load(cls, path: Path) -> InfraState:
        if not path.exists():
            return cls()
        return cls.model_validate_json(path.read_text())

    def save(self, path: Path) -> None:
        """Write-then-rename, so a reader never sees half a file."""
        path.parent.mkdir(parents=True, exist_ok=True)
        scratch = path.with_name(f".{path.name}.{os.getpid()}")
        scratch.write_text(self.model_dump_json(indent=2) + "\n")
        os.replace(scratch, path)


@contextmanager
def locked(home: Path) -> Iterator[None]:
    """One ``up``/``down``/fault command per home at a time, so two never start one service twice."""
    home.mkdir(parents=True, exist_ok=True)
    with (home / LOCK).open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield
