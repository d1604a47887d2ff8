"""A downstream's own check of the policy's capability: only a request the policy signed for,
exactly as it is, with a key still in the set and before it expires, gets through."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest
from joserfc.jwk import OKPKey

from shared import capabilities
from shared.contracts.effect_requests import EffectRequested
from shared.downstream.capability_check import CapabilityCheck, CapabilityReason
from shared.identity.signatures import generate_signing_key

NOW = datetime(2026, 12, 1, 12, tzinfo=UTC)
CURRENT, NEXT, RETIRED = (generate_signing_key(kid) for kid in ("p-2", "p-3", "p-1"))
KEYS = {key.kid: OKPKey.import_key(key.as_dict(private=False)) for key in (CURRENT, NEXT)}
ARGUMENTS = {"wallet_id": "tenant/acme/w-1", "amount": 4000, "currency": "EUR"}
CALL = uuid.uuid4()


def capability(key: OKPKey = CURRENT, *, expires_in: float = 60, **claims):
    return capabilities.sign({
        "capability_id": str(uuid.uuid4()), "decision_id": str(uuid.uuid4()), "run_id": "r-1",
        "logical_call_id": str(CALL), "operation_key": "acme:k-1", "principal_id": "agent-7",
        "tenant_id": "acme", "tool_name": "wallet.debit", "tool_version": "1",
        "arguments_hash": capabilities.arguments_hash(ARGUMENTS), "deadline_at": None,
        "run_max_attempts": None, "policy_version": "v1", "issued_at": NOW.isoformat(),
        "expires_at": (NOW + timedelta(seconds=expires_in)).isoformat()} | claims, key)


def request(**fields) -> EffectRequested:
    return EffectRequested.model_validate({
        "operation_key": "acme:k-1", "tool_name": "wallet.debit", "tool_version": "1",
        "canonical_arguments": ARGUMENTS, "attempt": 1, "fence": 1, "tenant_id": "acme",
        "logical_call_id": CALL,
        "deadline_at": NOW + timedelta(minutes=1), "capability": capability()} | fields)


CHECK = CapabilityCheck(KEYS, tenants=("acme",))


@pytest.mark.parametrize("asked, reason", [
    (request(), None),
    (request(capability=capability(NEXT)), None),  # rotation: both kids of the set verify
    (request(capability=None), CapabilityReason.CAPABILITY_MISSING),
    (request(capability=capability(RETIRED)), CapabilityReason.CAPABILITY_KEY_UNKNOWN),
    (request(capability=capability().model_copy(update={"tenant_id": "globex"})),
     CapabilityReason.CAPABILITY_SIGNATURE_INVALID),
    (request(capability=capability().model_copy(update={"arguments_hash": "b" * 64})),
     CapabilityReason.CAPABILITY_SIGNATURE_INVALID),
    (request(canonical_arguments=ARGUMENTS | {"amount": 400000}),
     CapabilityReason.CAPABILITY_NOT_FOR_THIS_REQUEST),
    (request(operation_key="acme:k-2"), CapabilityReason.CAPABILITY_NOT_FOR_THIS_REQUEST),
    (request(tool_name="wallet.refund"), CapabilityReason.CAPABILITY_NOT_FOR_THIS_REQUEST),
    (request(logical_call_id=uuid.uuid4()), CapabilityReason.CAPABILITY_NOT_FOR_THIS_REQUEST),
    (request(capability=capability(tenant_id="globex")),
     CapabilityReason.CAPABILITY_TENANT_NOT_SERVED),
    (request(capability=capability(expires_in=-1)), CapabilityReason.CAPABILITY_EXPIRED),
    (request(tool_name="wallet.refund", capability=None),  # a compensation needs one too
     CapabilityReason.CAPABILITY_MISSING),
], ids=["exact", "rotation", "missing", "rotated out", "tenant edited", "hash edited",
        "other amount", "other key", "other tool", "other call", "tenant not served",
        "expired", "compensation without"])
def test_only_what_the_policy_signed_gets_through(asked, reason):
    assert CHECK.refusal(asked, NOW) == reason


def test_a_signature_moved_from_another_capability_does_not_verify():
    other = capability(operation_key="acme:k-9")
    stolen = capability().model_copy(update={"signature": other.signature})
    assert CHECK.refusal(request(capability=stolen), NOW) == \
        CapabilityReason.CAPABILITY_SIGNATURE_INVALID


def test_a_capability_survives_the_wire():
    sent = EffectRequested.model_validate_json(request().model_dump_json())
    assert CHECK.refusal(sent, NOW) is None
