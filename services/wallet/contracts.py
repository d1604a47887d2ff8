"""The Kafka effect adapter as the wallet sees it (⚑; moves to shared/contracts later).

The dispatcher publishes ``EffectRequested`` on the tool's topic (``effects.wallet``); the
wallet answers each request with one ``EffectReceiptIssued`` envelope on ``reply_topic``,
whose payload is an ``EffectReceipt``. The operation key is the business intent: every
attempt of one intent carries the same key, and the wallet applies it at most once.
"""

from __future__ import annotations

import uuid
from enum import StrEnum
from typing import Any, Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

EFFECTS_WALLET = "effects.wallet"
EFFECTS_WALLET_RECEIPTS = "effects.wallet.receipts"
EFFECT_REQUESTED = "EffectRequested"
EFFECT_RECEIPT_ISSUED = "EffectReceiptIssued"

WalletTool = Literal["wallet.debit", "wallet.refund"]


class WalletReason(StrEnum):
    """Why a request was refused; stable, callers branch on them."""

    INSUFFICIENT_FUNDS = "insufficient_funds"
    UNKNOWN_WALLET = "unknown_wallet"
    CURRENCY_MISMATCH = "currency_mismatch"
    DEBIT_NOT_FOUND = "debit_not_found"
    REFUND_EXCEEDS_DEBIT = "refund_exceeds_debit"
    OPERATION_KEY_REUSED = "operation_key_reused"


class _Contract(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class EffectRequested(_Contract):
    operation_key: str = Field(min_length=1, max_length=200, description="The idempotency key.")
    tool_name: WalletTool
    tool_version: str = Field(min_length=1)
    canonical_arguments: dict[str, Any] = Field(description="Money in integer minor units.")
    attempt: int = Field(ge=1)
    fence: int = Field(ge=0, description="The dispatcher's lease generation for this run.")
    logical_call_id: uuid.UUID
    deadline_at: AwareDatetime
    reply_topic: str = Field(default=EFFECTS_WALLET_RECEIPTS, min_length=1)


class EffectReceipt(_Contract):
    operation_key: str
    logical_call_id: uuid.UUID = Field(description="Of the request answered (the original one "
                                                   "for a lookup).")
    attempt: int = Field(ge=1)
    status: Literal["applied", "rejected"]
    replayed: bool = Field(description="True when this is the answer recorded for a key the "
                                       "wallet had already settled: the effect was NOT repeated.")
    result: dict[str, Any] | None = Field(default=None, description=(
        "debit: {debit_id, balance_minor}; refund: {refund_id, balance_minor}."))
    reason: WalletReason | None = None
    receipt_id: uuid.UUID = Field(description="Minted when the key was settled; a replay "
                                              "returns the same id.")


class DebitArguments(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")  # memo and future fields pass by

    wallet_id: str = Field(min_length=1, max_length=200)
    amount: int = Field(gt=0, description="Integer minor units.")
    currency: str = Field(min_length=3, max_length=3)


class RefundArguments(DebitArguments):
    debit_id: str = Field(min_length=1, max_length=200)
