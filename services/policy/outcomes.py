"""Writing a verdict through the outbox of the transaction that decided it: the row and its
events commit together or not at all.

Every verdict is one event on ``ledger.authorizations``. A verdict that stops the call before
dispatch (denied, awaiting approval) is also told to the agent that proposed it, on its
tenant's ``agent.results.<tenant>``, in the same transaction: the policy decided it, so the
policy says it, one hop after the decision (docs/design.md §2). What the dispatcher makes of an
allowed call, the dispatcher announces.
"""

from __future__ import annotations

from dataclasses import dataclass

from shared.contracts.authorizations import (APPROVAL_REQUESTED, AUTHORIZATION_ALLOWED,
                                             AUTHORIZATION_DENIED, ApprovalRequest, Authorization,
                                             AuthorizationRefusal)
from shared.contracts.dispatch import CallState
from shared.contracts.intake import Intent
from shared.contracts.results import (TOOL_CALL_AWAITING_APPROVAL, TOOL_CALL_SETTLED,
                                      ToolCallAwaitingApproval, ToolCallSettled)
from shared.db.unit_of_work import UnitOfWork
from shared.messaging.envelope import Envelope
from shared.topology import AGENT_RESULTS, LEDGER_AUTHORIZATIONS, results_topic
from services.policy.verdicts import Verdict

PRODUCER = "policy"


@dataclass(frozen=True)
class Destinations:
    """Where verdicts are written (configurable, so that tests and deployments can move them)."""
    authorizations_topic: str = LEDGER_AUTHORIZATIONS
    results_family: str = AGENT_RESULTS
    """A verdict is told on topic ``<results_family>.<tenant>`` of the call's tenant."""


def announce(uow: UnitOfWork, to: Destinations, intent: Intent, verdict: Verdict,
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
    event = Envelope.new(event_type=event_type, run_id=intent.run_id, producer=PRODUCER,
                         payload=payload.model_dump(mode="json"), causation=causation)
    uow.emit(to.authorizations_topic, event)
    # A saga's compensation is no agent's call: nobody waits for its answer.
    if verdict.outcome != "allowed" and intent.compensates is None:
        uow.emit(results_topic(intent.tenant_id, to.results_family), _told(intent, payload, event))


def _told(intent: Intent, decided: AuthorizationRefusal | ApprovalRequest,
          event: Envelope) -> Envelope:
    """⚑ What the agent reads: the denial and its reason, or that the call awaits approval
    (how many approvals, by when; who may approve is the policy's, not the agent's). ``event``
    is the verdict's own, named as the cause so the answer continues its trace."""
    call = {"run_id": intent.run_id, "call_id": intent.provider_call_id,
            "logical_call_id": intent.logical_call_id, "operation_key": intent.operation_key,
            "tool_name": intent.tool_name, "tool_version": intent.tool_version}
    if isinstance(decided, ApprovalRequest):
        event_type, payload = TOOL_CALL_AWAITING_APPROVAL, ToolCallAwaitingApproval(
            **call, approvals_required=decided.quorum, requested_at=decided.requested_at,
            expires_at=decided.expires_at)
    else:
        event_type, payload = TOOL_CALL_SETTLED, ToolCallSettled(
            **call, status=CallState.DENIED, reason_code=decided.reason_code, receipt_id=None,
            result=None, settled_at=event.occurred_at)
    return Envelope.new(event_type=event_type, run_id=intent.run_id, producer=PRODUCER,
                        payload=payload.model_dump(mode="json"), causation=event)
