"""Wallet configuration, from ``INTENTLEDGER_WALLET_*`` environment variables."""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from services.wallet.contracts import EFFECTS_WALLET, EFFECTS_WALLET_RECEIPTS


class WalletSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="INTENTLEDGER_WALLET_", extra="ignore")

    request_topic: str = EFFECTS_WALLET
    """The tool registry's ``topic`` for wallet.debit and wallet.refund."""
    reply_topic: str = EFFECTS_WALLET_RECEIPTS
    """Created at start; requests may name another reply topic."""
    batch_size: int = Field(default=200, ge=1)
    faults: str = ""
    """Extra ``shared.faults`` rules for this process, e.g.
    ``wallet.after_commit_drop_response=drop@1`` (added to ``INTENTLEDGER_FAULTS``)."""
