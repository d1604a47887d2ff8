"""Relay tuning, from ``INTENTLEDGER_RELAY_*`` environment variables."""

from __future__ import annotations

import os
import socket

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from shared.topology import AGENT_RESULTS


class RelaySettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="INTENTLEDGER_RELAY_", extra="ignore")

    schemas: list[str] | None = None
    """Outbox schemas to drain; None discovers every schema that has an outbox table."""
    batch_size: int = Field(default=1000, ge=1)
    workers: int = Field(default=4, ge=1)
    """Concurrent shard claimers in this process; replicas add more."""
    poll_interval_s: float = Field(default=1.0, gt=0)
    """Fallback when a NOTIFY is missed (e.g. while the LISTEN connection reconnects)."""
    max_message_bytes: int = Field(default=900_000, le=990_000)
    """Rows larger than this are parked instead of failing every publish attempt. It stays
    below the producer's batch size so that every publishable record fits one batch."""
    publish_timeout_s: float = Field(default=30.0, gt=0)
    """A batch unacknowledged this long is given up (rows stay pending, the transaction ends).
    The producer keeps its queued batches, so order holds; they may arrive twice."""
    shutdown_grace_s: float = Field(default=15.0, gt=0)
    """On SIGTERM, workers get this long to finish a batch before they are cancelled."""
    creates_topics_prefix: str = f"{AGENT_RESULTS}."
    """A missing topic under this prefix is created on first use (a new tenant's results
    topic, ``services/relay/topics.py``); a missing topic elsewhere is an error."""
    created_topic_replicas: int = Field(default=1, ge=1)
    """Replicas of the topics it creates: 3 in a production cluster (k8s sets it)."""
    retention_hours: float = 72.0
    retention_interval_s: float = 300.0
    worker_id: str = Field(default_factory=lambda: f"{socket.gethostname()}:{os.getpid()}")
