"""Wallet configuration, from ``INTENTLEDGER_WALLET_*`` environment variables."""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from shared.topology import EFFECT_RECEIPTS, EFFECTS_WALLET


class WalletSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="INTENTLEDGER_WALLET_", extra="ignore")

    request_topic: str = EFFECTS_WALLET
    """The tool registry's ``topic`` for wallet.debit and wallet.refund."""
    reply_topic: str = EFFECT_RECEIPTS
    """Created at start (the dispatcher's reply topic); a request may name another."""
    batch_size: int = Field(default=200, ge=1)
    http_port: int | None = Field(default=None, ge=1, le=65535)
    """Also serve the HTTP API (``http_api.py``) on this port; unset: Kafka only."""
    http_host: str = "127.0.0.1"
    """The API has no authentication of its own: loopback unless the deployment's network
    policy decides who may reach it."""
    key_retention_s: float | None = Field(default=86400.0, gt=0)
    """Forget an operation key this long after its request (``forgetting.py``), as a payment
    API does; null: keep keys for ever. The registry's ``retry.key_retention_seconds`` for the
    wallet's tools must not be longer (the example registry declares these 24 h)."""
    forget_every_s: float = Field(default=60.0, gt=0)
    """How often the keys past the retention are forgotten."""
    faults: str = ""
    """Extra ``shared.faults`` rules for this process, e.g.
    ``wallet.after_commit_drop_response=drop@1`` (added to ``INTENTLEDGER_FAULTS``)."""
