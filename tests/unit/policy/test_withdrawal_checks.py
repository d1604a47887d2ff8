"""Who may withdraw a call awaiting approval: its own proposer, itself or through a gateway that
proposes for it, with a signature made for a withdrawal, for the call's tenant, while the call
still waits. Every other withdrawal is refused with its reason (no PostgreSQL: the stored
decision is built here)."""

from __future__ import annotations

import uuid
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from services.policy.repository import StoredDecision
from services.policy.withdrawals import (CALL_UNKNOWN, NOT_AWAITING_APPROVAL, NOT_THE_PROPOSER,
                                         refusal, sender)
from shared.contracts.withdrawals import CallWithdrawal
from shared.identity.signatures import APPROVAL, PROPOSAL, WITHDRAWAL, sign
from tests.unit.identity.test_delegation import KEYS, PRINCIPALS
from tests.unit.policy.builders import debit

INTENT = debit(principal="agent-7")
WAITING = StoredDecision(uuid.uuid4(), 1, "awaiting_approval", "v1", "big-debits", INTENT, None,
                         None, None, {})


def withdrawal(names: str = "agent-7", tenant: str = "acme",
               run: str = INTENT.run_id) -> CallWithdrawal:
    return CallWithdrawal(tenant_id=tenant, run_id=run,
                          logical_call_id=INTENT.logical_call_id, principal_id=names,
                          reason="changed my mind", decided_at=datetime.now(UTC))


def checked(record: CallWithdrawal, signer: str = "agent-7", *, signed_for: str = "acme",
            use: str = WITHDRAWAL, stored: StoredDecision | None = WAITING,
            signatures: int = 1, **claims) -> str | None:
    value = record.model_dump_json().encode()
    token = sign(value, KEYS[signer], principal_id=signer, tenant_id=signed_for, use=use,
                 **claims).encode()
    return judged(value, (token,) * signatures, record, stored)


def judged(value: bytes, signatures: tuple[bytes, ...], record: CallWithdrawal,
           stored: StoredDecision | None) -> str | None:
    """As the policy judges it: who sent it, and only then whether it counts for the call."""
    proven = sender(value, signatures, PRINCIPALS, record)
    return proven if isinstance(proven, str) else refusal(proven, record, stored)


def for_person(person: str) -> StoredDecision:
    """The waiting call, as a gateway proposed it for ``person``."""
    return replace(WAITING, intent=INTENT.model_copy(update={"person_id": person}))


def test_the_calls_own_agent_withdraws_it_itself_or_through_its_gateway():
    assert checked(withdrawal()) is None
    assert checked(withdrawal(), "mcp-gateway", agent="agent-7") is None
    assert checked(withdrawal(), "mcp-gateway", agent="agent-7", person="finance:a",
                   stored=for_person("finance:a")) is None


@pytest.mark.parametrize(("stored", "claims"), [
    (for_person("finance:b"), {"agent": "agent-7", "person": "finance:a"}),  # another person
    (for_person("finance:a"), {"agent": "agent-7"}),  # the agent, for no person
    (WAITING, {"agent": "agent-7", "person": "finance:a"}),  # a person, for the agent's own call
])
def test_a_call_proposed_for_a_person_is_withdrawn_by_that_person_only(stored, claims):
    """The people behind one agent client share its principal: the person the call was
    proposed for is part of who proposed it."""
    assert checked(withdrawal(), "mcp-gateway", stored=stored, **claims) == NOT_THE_PROPOSER


@pytest.mark.parametrize(("record", "options", "code"), [
    (withdrawal("mallory"), {"signer": "mallory"}, NOT_THE_PROPOSER),
    (withdrawal(), {"signer": "mallory"}, "signature_principal_mismatch"),
    (withdrawal(), {"signer": "mallory", "agent": "agent-7"}, "signer_not_proposer_for_others"),
    (withdrawal(), {"signer": "console", "agent": "agent-7"}, "signer_not_proposer_for_others"),
    (withdrawal(), {"use": PROPOSAL}, "signature_for_another_use"),
    (withdrawal(), {"use": APPROVAL}, "signature_for_another_use"),
    (withdrawal(), {"signed_for": "globex"}, "tenant_not_allowed_for_principal"),
    (withdrawal("mallory"), {"signer": "mcp-gateway", "agent": "mallory", "signed_for": "globex"},
     "signature_tenant_mismatch"),
    (withdrawal(), {"signatures": 2}, "signature_malformed"),
    (withdrawal("globex-agent", "globex"), {"signer": "globex-agent", "signed_for": "globex"},
     CALL_UNKNOWN),
    (withdrawal(), {"stored": None}, CALL_UNKNOWN),
    (withdrawal(run="another-run"), {}, CALL_UNKNOWN),
    (withdrawal(), {"stored": replace(WAITING, outcome="allowed")}, NOT_AWAITING_APPROVAL),
    (withdrawal(), {"stored": replace(WAITING, outcome="denied")}, NOT_AWAITING_APPROVAL),
])
def test_anyone_else_or_too_late_is_refused_with_the_reason(record, options, code):
    assert checked(record, **options) == code


def test_an_expired_signature_is_refused():
    record = withdrawal()
    value = record.model_dump_json().encode()
    token = sign(value, KEYS["agent-7"], principal_id="agent-7", tenant_id="acme",
                 use=WITHDRAWAL, now=datetime.now(UTC) - timedelta(minutes=10))
    assert judged(value, (token.encode(),), record, WAITING) == "signature_expired"


def test_a_signature_over_other_bytes_is_refused():
    record = withdrawal()
    token = sign(b"{}", KEYS["agent-7"], principal_id="agent-7", tenant_id="acme", use=WITHDRAWAL)
    assert judged(record.model_dump_json().encode(), (token.encode(),), record,
                  WAITING) == "signature_invalid"
