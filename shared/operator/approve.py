"""A person's decision on an intent awaiting approval (``intentledger approve|reject``, the demo).

The command reads what the approval must bind (run, tenant, operation key, arguments hash)
from the policy's own record of the pending request, so an operator names only the call, and
publishes an ``ApprovalDecision`` to ``ledger.approvals`` like any other approver's tool would.
Publishing is not counting: the policy service checks the approval (its signature, the
approver's role, expiry, arguments) when it applies it and records why one does not count.
The approver the record names is the signer's own id (or the person a console signs for):
a decision is always signed by the one whose decision it is.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg

from shared.config import Endpoints
from shared.contracts.approvals import APPROVAL_GRANTED, APPROVAL_REFUSED, ApprovalDecision
from shared.identity.signatures import APPROVAL
from shared.messaging.envelope import Envelope
from shared.operator.publish import Signer, publish

PRODUCER = "intentledger-cli"


class NotAwaitingApproval(Exception):
    """The call has no pending approval request; nothing was published."""


@dataclass(frozen=True)
class Answer:
    logical_call_id: uuid.UUID
    granted: bool
    reason: str | None = None
    ttl_seconds: float = 900.0
    """How long a grant stays valid; the capability it leads to expires no later."""


async def send_answer(endpoints: Endpoints, answer: Answer, *, topic: str,
                      signer: Signer) -> dict[str, Any]:
    """Publish the decision of ``signer.acting``, signed by ``signer``, on ``topic``, where the
    policy reads approvals (its ``approvals_topic``); returns the published envelope as
    JSON-ready data."""
    pending = await pending_request(endpoints.database_url, answer.logical_call_id)
    envelope = decision_envelope(pending, answer, signer.acting)
    await publish(endpoints.kafka_bootstrap, topic, envelope,
                  signature=signer.signature(envelope.value(), tenant_id=pending["tenant_id"],
                                             use=APPROVAL))
    return envelope.model_dump(mode="json")


def decision_envelope(pending: asyncpg.Record, answer: Answer, approver_id: str) -> Envelope:
    """The ``ApprovalDecision`` of ``approver_id`` on the request ``pending`` names, bound to
    what the request binds (run, tenant, operation key, arguments hash)."""
    now = datetime.now(UTC)
    decision = ApprovalDecision(
        decision="granted" if answer.granted else "refused", run_id=pending["run_id"],
        tenant_id=pending["tenant_id"], logical_call_id=answer.logical_call_id,
        operation_key=pending["operation_key"], arguments_hash=pending["arguments_hash"],
        approver_id=approver_id, reason=answer.reason, decided_at=now,
        expires_at=now + timedelta(seconds=answer.ttl_seconds) if answer.granted else None)
    return Envelope.new(event_type=APPROVAL_GRANTED if answer.granted else APPROVAL_REFUSED,
                        run_id=decision.run_id, producer=PRODUCER,
                        payload=decision.model_dump(mode="json"))


async def pending_request(database_url: str, logical_call_id: uuid.UUID) -> asyncpg.Record:
    """The policy's record of the call's open approval request; raises NotAwaitingApproval."""
    conn = await asyncpg.connect(database_url, server_settings={"application_name": PRODUCER})
    try:
        row = await conn.fetchrow(
            "SELECT run_id, tenant_id, operation_key, arguments_hash, outcome, expires_at"
            " FROM policy.decisions WHERE logical_call_id = $1", logical_call_id)
    except asyncpg.UndefinedTableError:
        raise NotAwaitingApproval("the policy schema is not migrated: no call awaits approval") from None
    finally:
        await conn.close()
    if row is None:
        raise NotAwaitingApproval(f"call {logical_call_id} has no policy decision")
    if row["outcome"] != "awaiting_approval":
        raise NotAwaitingApproval(f"call {logical_call_id} is not awaiting approval "
                                  f"(it is {row['outcome']})")
    if row["expires_at"] <= datetime.now(UTC):
        raise NotAwaitingApproval(f"the approval request for call {logical_call_id} expired at "
                                  f"{row['expires_at'].isoformat()}")
    return row
