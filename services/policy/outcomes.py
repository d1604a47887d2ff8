"""Announcing a verdict on ``ledger.authorizations``, through the outbox of the transaction
that wrote it: the row and its event commit together or not at all."""

from __future__ import annotations

from shared.contracts.authorizations import (APPROVAL_REQUESTED, AUTHORIZATION_ALLOWED,
                                             AUTHORIZATION_DENIED, ApprovalRequest, Authorization,
                                             AuthorizationRefusal)
from shared.contracts.intake import Intent
from shared.db.unit_of_work import UnitOfWork
from shared.messaging.envelope import Envelope
from services.policy.verdicts import Verdict

PRODUCER = "policy"


def announce(uow: UnitOfWork, topic: str, intent: Intent, verdict: Verdict,
             causation: Envelope | None) -> None:
    common = {"intent": intent, "decision_id": verdict.decision_id,
              "policy_version": verdict.policy_version}
    if verdict.outcome == "allowed":
        event_type = AUTHORIZATION_ALLOWED
        payload = Authorization(**common, rule=verdict.rule, capability=verdict.capability)
    elif verdict.outcome == "denied":
        event_type = AUTHORIZATION_DENIED
        payload = AuthorizationRefusal(**common, rule=verdict.rule,
                                       reason_code=str(verdict.reason_code), message=verdict.message)
    else:
        event_type = APPROVAL_REQUESTED
        payload = ApprovalRequest(**common, rule=verdict.rule, quorum=verdict.approval.quorum,
                                  approvers=verdict.approval.approvers,
                                  requested_at=verdict.issued_at, expires_at=verdict.expires_at)
    uow.emit(topic, Envelope.new(event_type=event_type, run_id=intent.run_id, producer=PRODUCER,
                                 payload=payload.model_dump(mode="json"), causation=causation))
