"""The ``approve`` fault: people answer a call's approval request, each decision signed with
the key of the one who signs it, in the order the protocol lists them.

A decision may name another approver than its signer: what an approver who wants a quorum to
themselves would send. The policy counts verified principals, not the names records carry
(``shared.identity.acting``): a second grant signed by the same person under a colleague's name
must not count, and the scenario's assertions say what that means for the money.
"""

from __future__ import annotations

import asyncio
import time
import uuid

from shared.config import Endpoints
from shared.contracts.fault_protocol import Approve
from shared.identity.local import LocalIdentities
from shared.identity.signatures import APPROVAL
from shared.operator.approve import Answer, NotAwaitingApproval, decision_envelope, pending_request
from shared.operator.publish import Signer, publish
from shared.topology import LEDGER_APPROVALS

POLL_S = 0.2


async def approve(endpoints: Endpoints, fault: Approve, logical_call_id: uuid.UUID,
                  identities: LocalIdentities, deadline: float) -> list[str]:
    """Once the policy asked for approval (before ``deadline``, ``time.monotonic``), publish
    each decision; what was published, for the report."""
    pending = None
    while pending is None:
        try:
            pending = await pending_request(endpoints.database_url, logical_call_id)
        except NotAwaitingApproval:
            if time.monotonic() > deadline:
                raise RuntimeError(f"fault {fault.id}: {fault.call} never awaited approval") from None
            await asyncio.sleep(POLL_S)
    published = []
    for decision in fault.decisions:
        signer = Signer(identities.signing_key(decision.signed_by), decision.signed_by)
        named = decision.approver or decision.signed_by
        envelope = decision_envelope(pending, Answer(logical_call_id, decision.decision == "granted"),
                                     named)
        await publish(endpoints.kafka_bootstrap, LEDGER_APPROVALS, envelope,
                      signature=signer.signature(envelope.value(), tenant_id=pending["tenant_id"],
                                                 use=APPROVAL))
        published.append(f"{decision.decision} naming {named}, signed by {decision.signed_by}")
    return published
