"""Projection configuration, from ``INTENTLEDGER_PROJECTION_*`` environment variables."""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from shared.topology import LEDGER_AUTHORIZATIONS, LEDGER_DISPATCH, LEDGER_EFFECTS, LEDGER_INTAKE


class ProjectionSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="INTENTLEDGER_PROJECTION_", extra="ignore")

    intake_topic: str = LEDGER_INTAKE
    authorizations_topic: str = LEDGER_AUTHORIZATIONS
    dispatch_topic: str = LEDGER_DISPATCH
    effects_topic: str = LEDGER_EFFECTS
    batch_size: int = Field(default=500, ge=1)
    fetch_max_wait_ms: int = Field(default=100, ge=0)
    fetch_min_bytes: int = Field(default=65536, ge=1)
    """The projection is a read model, off the agent's path: Kafka may hold its fetches up to
    ``fetch_max_wait_ms`` to gather ``fetch_min_bytes`` of events, so that each batch (one
    transaction, one fetch, one offset commit) applies more of them."""
    health_sample_s: float = Field(default=15.0, ge=0)
    """How often relay backlog and consumer lag are sampled for the console's health charts
    (``health_sampler.py``); 0 turns sampling off."""

    @property
    def ledger_topics(self) -> tuple[str, ...]:
        return (self.intake_topic, self.authorizations_topic, self.dispatch_topic,
                self.effects_topic)
