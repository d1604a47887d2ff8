"""Whose results topic a message refused whole is answered on: the tenant its body names, else
the one a verified signature names, else nobody's (dead-lettered). Never a topic a tenant id
that is no DNS label would make. And a refusal names who proposed, for the audit."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest

from services.proposal_intake.outcomes import Outcomes
from services.proposal_intake.refusals import recorded_under, reply_tenant
from services.proposal_intake.limits import ReplyAddress, reply_address
from shared.contracts.proposals import ToolCallProposal
from shared.identity.signatures import SignedBy

NOW = datetime(2026, 12, 2, tzinfo=UTC)


def signed_for(tenant: str) -> SignedBy:
    return SignedBy("user-42", tenant, "k1", NOW, NOW)


def test_the_tenant_the_body_names_even_when_the_signature_is_for_another():
    """Its agent reads there; the answer carries only the sender's own content."""
    address = reply_address({"run_id": "r", "tenant_id": "acme"})
    assert reply_tenant(signed_for("globex"), address) == "acme"
    assert reply_tenant(None, address) == "acme"


@pytest.mark.parametrize("claimed", [None, "Acme", "acme.eu", "acme_eu", 7, ""])
def test_a_body_naming_no_valid_tenant_is_answered_to_the_verified_signers(claimed):
    address = reply_address({"run_id": "r", "tenant_id": claimed})
    assert reply_tenant(signed_for("globex"), address) == "globex"


@pytest.mark.parametrize("signed", [None, signed_for("Globex"), signed_for("globex.eu")])
def test_with_neither_there_is_no_topic_to_answer_on(signed):
    assert reply_tenant(signed, ReplyAddress("r", ())) is None


# Whose history the refusal enters: only a tenant the sender proved. The body's claim is what
# an attacker writes, and an event under the victim's tenant would land in the victim's run.

def test_a_refusal_is_recorded_under_the_verified_signers_tenant_not_the_body_claim():
    address = reply_address({"run_id": "r", "tenant_id": "acme"})
    assert recorded_under(signed_for("globex"), address, frozenset()) == "globex"


def test_an_unsigned_refusal_is_recorded_only_for_a_tenant_that_takes_unsigned_proposals():
    address = reply_address({"run_id": "r", "tenant_id": "acme"})
    assert recorded_under(None, address, frozenset({"acme"})) == "acme"
    assert recorded_under(None, address, frozenset({"globex"})) is None
    assert recorded_under(None, reply_address({"run_id": "r"}), frozenset({"acme"})) is None


class _Outbox:
    def __init__(self) -> None:
        self.payloads: list[dict] = []

    def emit(self, topic: str, envelope) -> None:
        self.payloads.append(envelope.payload)


def test_the_intakes_refusals_say_who_proposed_for_the_audit():
    proposal = ToolCallProposal(run_id="run-1", principal_id="agent-7", tenant_id="acme",
                                provider="generic", provider_call_id="c-1", tool_name="wallet.fly",
                                tool_version=None, arguments={}, caller_operation_key=None,
                                deadline_at=None, budget=None)
    outbox = _Outbox()
    Outcomes(outbox, uuid.uuid4()).rejected(proposal, "unknown_tool", "no such tool")
    assert {(p["tenant_id"], p["principal_id"]) for p in outbox.payloads} == {("acme", "agent-7")}
