"""What is the wallet's own in the effect-adapter contract (``shared.contracts.effect_requests``).

The requests, lookups and receipts are the generic ⚑ contract every downstream shares; the
wallet adds its topic, its tools' argument models and its stable refusal reasons.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field


class WalletReason(StrEnum):
    """Why a request was not applied; stable, callers branch on them.

    Only the domain refusals are recorded against the key (a replay returns them). The others
    describe the request, not the intent, and leave the key unsettled: a later request under
    it may still apply, and a lookup meanwhile answers ``not_found``.
    """

    INSUFFICIENT_FUNDS = "insufficient_funds"
    UNKNOWN_WALLET = "unknown_wallet"
    CURRENCY_MISMATCH = "currency_mismatch"
    DEBIT_NOT_FOUND = "debit_not_found"
    REFUND_EXCEEDS_DEBIT = "refund_exceeds_debit"
    OPERATION_KEY_REUSED = "operation_key_reused"
    """The key was settled for other arguments (or another tool); nothing was applied."""
    STALE_FENCE = "stale_fence"
    """A higher fence was seen for the run: the sender lost its lease. Status ``stale``."""
    DEADLINE_PASSED = "deadline_passed"
    """The request arrived after its ``deadline_at``; the caller has stopped waiting."""
    UNSUPPORTED_TOOL = "unsupported_tool"
    INVALID_ARGUMENTS = "invalid_arguments"
    """The canonical arguments do not fit the tool's argument model."""
    REFUSED = "refused"
    """The wallet declined to act (the ``wallet.refuse`` and ``wallet.refuse_refund`` fault
    points)."""


class DebitArguments(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")  # memo and future fields pass by

    wallet_id: str = Field(min_length=1, max_length=200)
    amount: int = Field(gt=0, description="Integer minor units.")
    currency: str = Field(min_length=3, max_length=3)


class RefundArguments(DebitArguments):
    debit_id: str = Field(min_length=1, max_length=200)
