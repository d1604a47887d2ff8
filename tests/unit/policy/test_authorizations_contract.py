"""What the policy emits is what ``schemas/ledger.authorizations.schema.json`` says, and the
examples there are read by the models."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime

import pytest
from jsonschema import Draft202012Validator

from shared.policy import evaluate, load_policy
from services.policy.outcomes import Destinations, announce
from services.policy.verdicts import denial, verdict_of
from shared.capabilities import refusal
from shared.identity.capability_keys import parse_public_keys
from shared.identity.signatures import generate_signing_key
from shared.contracts.authorizations import (ApprovalRequest, Authorization, AuthorizationRefusal,
                                             PolicyReason)
from shared.messaging.envelope import Envelope
from shared.messaging.schema_export import SCHEMAS
from shared.topology import LEDGER_AUTHORIZATIONS

from .builders import EXAMPLE_POLICY, NOW, debit, email, request

SCHEMA = json.loads((SCHEMAS / f"{LEDGER_AUTHORIZATIONS}.schema.json").read_text(encoding="utf-8"))
EXAMPLES = SCHEMAS / "examples" / LEDGER_AUTHORIZATIONS
MODEL_OF = {"AuthorizationAllowed": Authorization, "AuthorizationDenied": AuthorizationRefusal,
            "ApprovalRequested": ApprovalRequest}


class _Outbox:
    def __init__(self) -> None:
        self.events: list[tuple[str, dict]] = []

    def emit(self, topic: str, envelope: Envelope) -> None:
        self.events.append((topic, json.loads(envelope.value())))


def test_every_verdict_the_policy_announces_validates_against_the_topic_schema():
    policy, outbox = load_policy(EXAMPLE_POLICY), _Outbox()
    for call in (debit("40.00"), debit("600.00"), email(), debit(principal="agent-9")):
        the_request = request(call)
        verdict = verdict_of(uuid.uuid4(), evaluate(policy, the_request, None), the_request, None,
                             generate_signing_key("policy-unit"))
        announce(outbox, Destinations(), call, verdict, None)
    late = debit()
    announce(outbox, Destinations(), late, denial(
        uuid.uuid4(), policy.version, "acme-agent-email", PolicyReason.APPROVAL_REQUEST_EXPIRED,
        "lapsed", NOW, {}), None)
    ledger = [event for topic, event in outbox.events if topic == LEDGER_AUTHORIZATIONS]
    assert [event["event_type"] for event in ledger] == [
        "AuthorizationAllowed", "ApprovalRequested", "ApprovalRequested", "AuthorizationDenied",
        "AuthorizationDenied"]  # and what the agent is told (test_told_to_agent.py)
    validator = Draft202012Validator(SCHEMA, format_checker=Draft202012Validator.FORMAT_CHECKER)
    for event in ledger:
        validator.validate(event)


def test_a_payload_that_disagrees_with_its_event_type_is_invalid():
    allowed = json.loads((EXAMPLES / "authorization-allowed.json").read_text(encoding="utf-8"))
    assert Draft202012Validator(SCHEMA).is_valid(allowed)
    assert not Draft202012Validator(SCHEMA).is_valid(allowed | {"event_type": "AuthorizationDenied"})


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.json")), ids=lambda path: path.name)
def test_every_example_is_read_by_its_model(path):
    envelope = Envelope.model_validate_json(path.read_text(encoding="utf-8"))
    MODEL_OF[envelope.event_type].model_validate(envelope.payload)


def test_the_allowed_example_carries_a_capability_that_verifies_with_the_published_example_key():
    envelope = Envelope.model_validate_json((EXAMPLES / "authorization-allowed.json").read_text())
    allowed = Authorization.model_validate(envelope.payload)
    keys = parse_public_keys((EXAMPLES / "policy-public-keys.jwks").read_text())
    assert refusal(allowed.capability, allowed.intent, keys,
                   datetime(2026, 3, 14, 9, 13, tzinfo=UTC)) is None
