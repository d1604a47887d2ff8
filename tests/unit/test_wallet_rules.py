"""The wallet's pure rules, the downstream SDK's request hash and the effect-adapter models."""

import uuid
from datetime import UTC, datetime

import pytest
from pydantic import ValidationError

from downstreams.wallet.contracts import WalletReason
from downstreams.wallet.domain import Debit, Wallet, debit_refusal, refund_refusal
from shared.contracts.effect_requests import EffectReceipt, EffectRequested
from shared.downstream.idempotent_write import request_hash

WALLET = Wallet(id="tenant/acme/w-1", currency="EUR", balance_minor=5000, version=3)
DEBIT = Debit(debit_id="d-1", wallet_id=WALLET.id, amount_minor=4000, currency="EUR",
              refunded_minor=1000)


def test_a_debit_within_the_balance_is_allowed_to_the_last_cent():
    assert debit_refusal(WALLET, 5000, "EUR") is None


@pytest.mark.parametrize(("wallet", "amount", "currency", "reason"), [
    (None, 100, "EUR", WalletReason.UNKNOWN_WALLET),
    (WALLET, 100, "USD", WalletReason.CURRENCY_MISMATCH),
    (WALLET, 5001, "EUR", WalletReason.INSUFFICIENT_FUNDS),
])
def test_a_debit_is_refused_with_a_stable_reason(wallet, amount, currency, reason):
    assert debit_refusal(wallet, amount, currency) is reason


def test_a_refund_may_give_back_what_is_left_of_its_debit():
    assert refund_refusal(WALLET, DEBIT, 3000, "EUR") is None


@pytest.mark.parametrize(("wallet", "debit", "amount", "currency", "reason"), [
    (None, DEBIT, 100, "EUR", WalletReason.UNKNOWN_WALLET),
    (WALLET, None, 100, "EUR", WalletReason.DEBIT_NOT_FOUND),
    (WALLET, Debit("d-2", "tenant/acme/other", 4000, "EUR", 0), 100, "EUR",
     WalletReason.DEBIT_NOT_FOUND),
    (WALLET, DEBIT, 100, "USD", WalletReason.CURRENCY_MISMATCH),
    (WALLET, DEBIT, 3001, "EUR", WalletReason.REFUND_EXCEEDS_DEBIT),
])
def test_a_refund_is_refused_with_a_stable_reason(wallet, debit, amount, currency, reason):
    assert refund_refusal(wallet, debit, amount, currency) is reason


def test_the_request_hash_ignores_key_order_and_sees_every_value():
    one = {"wallet_id": "tenant/acme/w-1", "amount": 4000, "currency": "EUR"}
    assert request_hash(one) == request_hash(dict(reversed(one.items())))
    assert request_hash(one) != request_hash(one | {"amount": 4001})


def test_an_effect_request_defaults_its_reply_topic_and_refuses_attempt_zero():
    fields = dict(operation_key="k", tool_name="wallet.debit", tool_version="1",
                  canonical_arguments={}, attempt=1, fence=0, tenant_id="acme",
                  logical_call_id=uuid.uuid4(),
                  deadline_at=datetime.now(UTC))
    assert EffectRequested(**fields).reply_topic == "effects.receipts"
    for wrong in ({"attempt": 0}, {"fence": -1}, {"tool_name": ""},
                  {"deadline_at": datetime(2026, 1, 1)}):
        with pytest.raises(ValidationError):
            EffectRequested(**fields | wrong)


def test_a_rejected_receipt_carries_its_reason_code():
    receipt = EffectReceipt(operation_key="k", logical_call_id=uuid.uuid4(), attempt=1,
                            status="rejected", replayed=False, reason="insufficient_funds",
                            receipt_id=uuid.uuid4())
    assert receipt.model_dump(mode="json")["reason"] == "insufficient_funds"
