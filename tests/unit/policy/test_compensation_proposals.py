"""A compensation is authorized only as the one the registry derives for a call the policy
allowed, proposed under the seal of a principal with role ``compensator``: forged, tampered,
misattributed, expired or mis-derived proposals are refused before any rule is read."""

from __future__ import annotations

import hashlib
import uuid
from datetime import UTC, datetime, timedelta

import pytest

from services.dispatcher.compensations import Proposer
from services.policy.compensations import proposal_refusal
from services.policy.repository import StoredDecision
from shared.contracts.intake import Intent
from shared.identity.principals import Principals
from shared.identity.signatures import generate_signing_key
from shared.tools import load_registry
from shared.tools.compensation import (ArgumentsMissing, compensation_call_id,
                                       compensation_intent, compensation_mismatch)
from shared.tools.jcs import jcs
from tests.conftest import ROOT

NOW = datetime.now(UTC)
REGISTRY = load_registry(ROOT / "config" / "tools.example.yaml")
DEBIT, REFUND = REGISTRY.get("wallet.debit", "1"), REGISTRY.get("wallet.refund", "1")
ARGUMENTS = {"wallet_id": "tenant/acme/w-1", "amount": 4000, "currency": "EUR"}
RESULT = {"debit_id": "d-9", "balance_minor": 6000}
DISPATCHER = generate_signing_key("dispatcher-1")
OTHER = generate_signing_key("dispatcher-stolen")  # nobody's in the principals file
CONSOLE = generate_signing_key("console-1")
REVOKED = generate_signing_key("dispatcher-0")


def principal(principal_id: str, roles: list[str], *keys, revoked=None) -> dict:
    return {"id": principal_id, "kind": "service", "tenants": ["*"], "roles": roles,
            "keys": [{"kid": key.kid, "jwk": key.as_dict(private=False),
                      **({"revoked_at": revoked} if key is REVOKED else {})} for key in keys]}


PRINCIPALS = Principals.model_validate({"principals": [
    principal("dispatcher", ["compensator"], DISPATCHER, REVOKED, revoked=NOW - timedelta(days=1)),
    principal("console", ["publishes-for-people"], CONSOLE)]})


def debit() -> Intent:
    return Intent(run_id="run-1", provider="openai", provider_call_id="call_1",
                  logical_call_id=uuid.uuid4(), operation_key="acme:caller_stated:k1",
                  tool_name="wallet.debit", tool_version="1",
                  arguments_hash=hashlib.sha256(jcs(ARGUMENTS)).hexdigest(),
                  canonical_arguments=ARGUMENTS, principal_id="agent-7", tenant_id="acme",
                  deadline_at=NOW + timedelta(hours=1))


def decided(intent: Intent, outcome: str = "allowed") -> StoredDecision:
    return StoredDecision(uuid.uuid4(), 1, outcome, "v1", "r", intent, (4000, "EUR"), None, None,
                          {"intent": intent.model_dump(mode="json")})


def refund_of(original: Intent, deadline=NOW + timedelta(minutes=10)) -> Intent:
    return compensation_intent(original, RESULT, REFUND, DEBIT.compensation_arguments, deadline)


def test_the_compensation_is_derived_from_arguments_and_result_the_same_way_every_time():
    original = debit()
    refund = refund_of(original)
    assert refund.canonical_arguments == {**ARGUMENTS, "debit_id": "d-9"}
    assert refund.compensates == original.logical_call_id
    assert refund.logical_call_id == compensation_call_id(original.logical_call_id)
    assert refund.operation_key != original.operation_key and refund.tool_name == "wallet.refund"
    again = refund_of(original, NOW + timedelta(minutes=20))
    assert (again.logical_call_id, again.operation_key) == (refund.logical_call_id,
                                                            refund.operation_key)
    assert compensation_mismatch(original, DEBIT, REFUND, refund) is None


def test_no_compensation_without_the_result_it_needs():
    with pytest.raises(ArgumentsMissing):
        compensation_intent(debit(), {"balance_minor": 1}, REFUND, DEBIT.compensation_arguments,
                            NOW)


def _edited(refund: Intent, **arguments) -> Intent:
    changed = {**refund.canonical_arguments, **arguments}
    return refund.model_copy(update={"canonical_arguments": changed,
                                     "arguments_hash": hashlib.sha256(jcs(changed)).hexdigest()})


@pytest.mark.parametrize("tamper, found", [
    (lambda r: _edited(r, amount=400_000), "amount is not the original's arguments.amount"),
    (lambda r: _edited(r, wallet_id="tenant/acme/w-2"), "wallet_id is not the original's"),
    (lambda r: r.model_copy(update={"arguments_hash": "b" * 64}), "arguments hash"),
    (lambda r: r.model_copy(update={"operation_key": "acme:caller_stated:other"}), "operation key"),
    (lambda r: r.model_copy(update={"logical_call_id": uuid.uuid4()}), "call id"),
    (lambda r: r.model_copy(update={"compensates": uuid.uuid4()}), "another call"),
    (lambda r: r.model_copy(update={"tenant_id": "globex"}), "another run, principal or tenant"),
    (lambda r: r.model_copy(update={"run_id": "run-2"}), "another run, principal or tenant"),
], ids=["amount", "wallet", "hash", "key", "call id", "compensates", "tenant", "run"])
def test_a_compensation_that_is_not_the_derived_one_is_found_out(tamper, found):
    original = debit()
    assert found in compensation_mismatch(original, DEBIT, REFUND, tamper(refund_of(original)))


def test_what_comes_from_the_result_is_the_proposers_to_state():
    """Only the dispatcher saw the debit's result; the wallet refunds only a debit of the same
    wallet and never more than it took (``downstreams/wallet/domain.py``)."""
    original = debit()
    another_debit = compensation_intent(original, {"debit_id": "d-1"}, REFUND,
                                        DEBIT.compensation_arguments, NOW + timedelta(minutes=10))
    assert compensation_mismatch(original, DEBIT, REFUND, another_debit) is None


def proposal(original: Intent, key=DISPATCHER, requested_by="dispatcher", refund=None):
    return Proposer(requested_by, key).propose(refund or refund_of(original), original.operation_key)


def test_a_sealed_proposal_for_an_allowed_call_may_be_judged():
    original = debit()
    assert proposal_refusal(proposal(original), PRINCIPALS, REGISTRY, decided(original), NOW) is None


@pytest.mark.parametrize("attack, found", [
    (lambda o: proposal(o, key=OTHER), "key_unknown"),
    (lambda o: proposal(o, key=REVOKED), "revoked"),
    (lambda o: proposal(o, key=CONSOLE, requested_by="console"), "may not propose compensations"),
    (lambda o: proposal(o, requested_by="console"), "sealed by dispatcher, names 'console'"),
    (lambda o: proposal(o).model_copy(update={"intent": _edited(refund_of(o), amount=9)}),
     "signature_invalid"),
    (lambda o: proposal(o).model_copy(update={"signature": proposal(debit()).signature}),
     "signature_invalid"),
    (lambda o: proposal(o, refund=_edited(refund_of(o), amount=400_000)), "amount is not"),
    (lambda o: proposal(o, refund=refund_of(o, NOW - timedelta(seconds=1))), "expired"),
], ids=["unknown key", "revoked key", "signer without the role", "misattributed",
        "edited after sealing", "seal of another proposal", "sealed but mis-derived", "expired"])
def test_a_proposal_is_refused_before_any_rule_is_read(attack, found):
    original = debit()
    refusal = proposal_refusal(attack(original), PRINCIPALS, REGISTRY, decided(original), NOW)
    assert refusal is not None and found in refusal


@pytest.mark.parametrize("stored", [None, "denied", "awaiting_approval"])
def test_only_a_call_this_policy_allowed_is_compensated(stored):
    original = debit()
    decision = decided(original, stored) if stored else None
    assert "was not allowed by this policy" in proposal_refusal(proposal(original), PRINCIPALS,
                                                                REGISTRY, decision, NOW)
