"""The capability an allow carries verifies for its intent only, and outlives nothing."""

from __future__ import annotations

import uuid
from datetime import timedelta

from joserfc.jwk import OKPKey

from shared.policy import evaluate
from services.policy.capability import issue
from shared.capabilities import refusal
from shared.contracts.authorizations import Capability
from shared.identity.signatures import generate_signing_key

from .builders import APPROVAL, NOW, debit, email, grant, policy, request, rule

KEY, OTHER = generate_signing_key("policy-unit-1"), generate_signing_key("policy-unit-0")
KEYS = {KEY.kid: OKPKey.import_key(KEY.as_dict(private=False))}


def _allowed(the_intent, *approvals, **top):
    mail = rule("mail", tools=["email.send"], effect="require_approval", approval=APPROVAL)
    decision = evaluate(policy(mail, rule("rest"), **top), request(the_intent, *approvals), None)
    assert decision.effect == "allow"
    return issue(uuid.uuid4(), the_intent, decision, NOW, KEY)


def test_a_capability_verifies_for_its_intent_after_a_json_round_trip():
    call = debit()
    capability = Capability.model_validate_json(_allowed(call).model_dump_json())
    assert refusal(capability, call, KEYS, NOW) is None
    assert refusal(capability, debit(), KEYS, NOW) == "capability_not_for_this_intent"
    assert refusal(capability, call, {KEY.kid: OTHER}, NOW) == "capability_signature_invalid"
    assert refusal(capability, call, {OTHER.kid: OTHER}, NOW) == "capability_key_unknown"


def test_a_capability_expires_with_the_policy_lifetime_or_the_deadline_whichever_is_first():
    assert _allowed(debit(), capability_ttl_seconds=60).expires_at == NOW + timedelta(seconds=60)
    soon = debit(deadline_at=NOW + timedelta(seconds=10))
    capability = _allowed(soon, capability_ttl_seconds=60)
    assert capability.expires_at == NOW + timedelta(seconds=10)
    assert refusal(capability, soon, KEYS, NOW + timedelta(seconds=10)) == "capability_expired"


def test_a_capability_carries_its_approval_chain_and_expires_with_it():
    approval = grant("operator:dana", expires_at=NOW + timedelta(seconds=30))
    call = email()
    capability = _allowed(call, approval)
    assert capability.approvals == (approval,)
    assert capability.expires_at == approval.expires_at
    assert capability.policy_version and capability.limits == {}


def test_a_tampered_capability_does_not_verify():
    call = debit()
    capability = _allowed(call)
    widened = capability.model_copy(update={"expires_at": NOW + timedelta(days=1)})
    assert refusal(widened, call, KEYS, NOW) == "capability_signature_invalid"
