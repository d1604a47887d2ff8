"""An approval counts only for the exact call it names, from an allowed approver, in time."""

from __future__ import annotations

from datetime import timedelta

import pytest

from services.policy.approvals import PendingCall, already_counted, approval_refusal
from shared.policy.document import ApprovalRule
from shared.contracts.approvals import ApprovalDecision
from shared.contracts.authorizations import PolicyReason

from .builders import NOW, email, grant

CALL = email()
RULE = ApprovalRule(quorum=1, approvers=("operator:*",), ttl_seconds=900)
PENDING = PendingCall("awaiting_approval", CALL, RULE, NOW + timedelta(minutes=10))


def approval(**changes) -> ApprovalDecision:
    fields = {"decision": "granted", "run_id": CALL.run_id, "tenant_id": CALL.tenant_id,
              "logical_call_id": CALL.logical_call_id, "operation_key": CALL.operation_key,
              "arguments_hash": CALL.arguments_hash, "approver_id": "operator:dana",
              "decided_at": NOW, "expires_at": NOW + timedelta(minutes=15)}
    return ApprovalDecision(**fields | changes)


def test_a_grant_for_the_exact_call_by_an_allowed_approver_counts():
    assert approval_refusal(PENDING, approval(), NOW) is None


def test_a_refusal_needs_no_expiry():
    assert approval_refusal(PENDING, approval(decision="refused", expires_at=None), NOW) is None


@pytest.mark.parametrize("pending, changes, reason", [
    (None, {}, PolicyReason.APPROVAL_NOT_PENDING),
    (PendingCall("allowed", CALL, None, None), {}, PolicyReason.APPROVAL_NOT_PENDING),
    (PENDING, {"tenant_id": "globex"}, PolicyReason.APPROVAL_NOT_FOR_THIS_CALL),
    (PENDING, {"run_id": "run-other"}, PolicyReason.APPROVAL_NOT_FOR_THIS_CALL),
    (PENDING, {"operation_key": "acme:other"}, PolicyReason.APPROVAL_NOT_FOR_THIS_CALL),
    (PENDING, {"arguments_hash": "0" * 64}, PolicyReason.APPROVAL_FOR_OTHER_ARGUMENTS),
    (PENDING, {"approver_id": CALL.principal_id}, PolicyReason.APPROVER_IS_REQUESTER),
    (PENDING, {"approver_id": "intern:bob"}, PolicyReason.APPROVER_NOT_ALLOWED),
    (PENDING, {"expires_at": None}, PolicyReason.APPROVAL_EXPIRED),
    (PENDING, {"expires_at": NOW}, PolicyReason.APPROVAL_EXPIRED),
    (PendingCall("awaiting_approval", CALL, RULE, NOW), {}, PolicyReason.APPROVAL_REQUEST_EXPIRED),
], ids=["no such intent", "already decided", "other tenant", "other run", "other key",
        "other arguments", "requester", "not an approver", "grant without expiry",
        "expired grant", "lapsed request"])
def test_an_approval_that_may_not_count_is_refused_with_its_reason(pending, changes, reason):
    assert approval_refusal(pending, approval(**changes), NOW) == reason


def test_the_requester_is_refused_even_where_the_patterns_would_admit_it():
    anyone = PendingCall("awaiting_approval", CALL, RULE.model_copy(update={"approvers": ("*",)}),
                         NOW + timedelta(minutes=1))
    assert approval_refusal(anyone, approval(approver_id=CALL.principal_id), NOW) == \
        PolicyReason.APPROVER_IS_REQUESTER


def test_the_person_a_gateway_proposed_for_may_not_approve_their_own_request():
    """Through the MCP gateway the agent is the principal and the person behind it is recorded
    (``person_id``): that person asked, so their approval is the requester's."""
    asked = PendingCall("awaiting_approval", CALL.model_copy(update={"person_id": "operator:dana"}),
                        RULE, NOW + timedelta(minutes=10))
    assert approval_refusal(asked, approval(approver_id="operator:dana"), NOW) == \
        PolicyReason.APPROVER_IS_REQUESTER
    assert approval_refusal(asked, approval(approver_id="operator:eve"), NOW) is None


def test_an_approver_counts_once_until_their_grant_expires():
    chain = [grant("operator:dana", expires_at=NOW + timedelta(seconds=1))]
    assert already_counted("operator:dana", chain, NOW)
    assert not already_counted("operator:eve", chain, NOW)
    assert not already_counted("operator:dana", chain, NOW + timedelta(seconds=1))
