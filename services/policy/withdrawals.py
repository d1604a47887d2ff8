"""An agent's withdrawal of its own call while the call awaits approval (``CallWithdrawal``).

Who may withdraw is who proposed: the signature must prove the call's own principal sends it,
by its own key or through a gateway that proposes for it (the same delegation rule as for
proposals, ``shared.identity.delegation``), for the call's tenant, signed for this use; and for
a call a gateway proposed for a person, for that same person (another person behind the same
agent, or the agent alone, is not the proposer). Anyone
else's withdrawal, a forged or expired one, or one for a call no longer waiting is recorded as
refused with its reason and changes nothing. The answer a refused withdrawal gets is the call's
own outcome, unchanged: the record's sender reads that on its results topic like any answer.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence

import asyncpg

from services.policy.repository import SCHEMA, StoredDecision
from shared.contracts.withdrawals import CallWithdrawal
from shared.identity.delegation import Proposer, proposer_of
from shared.identity.principals import Principals
from shared.identity.signatures import (WITHDRAWAL, IdentityReason, SignatureRefused,
                                        verify_record)

CALL_UNKNOWN = "call_unknown"
"""No call of the withdrawal's tenant and run has that id: to its sender, the same as another
tenant's."""
NOT_THE_PROPOSER = "not_the_proposer"
NOT_AWAITING_APPROVAL = "call_not_awaiting_approval"


def sender(value: bytes, signatures: Sequence[bytes], principals: Principals,
           withdrawal: CallWithdrawal) -> Proposer | str:
    """The proposer the withdrawal's signature proves it comes from, or the reason code why it
    proves none. Checked before the call it names is looked at: a record anyone on the topic
    could write locks no decision."""
    try:
        signed = verify_record(value, signatures, principals, use=WITHDRAWAL)
        if signed.tenant_id != withdrawal.tenant_id:
            raise SignatureRefused(IdentityReason.SIGNATURE_TENANT_MISMATCH,
                                   f"signed for tenant {signed.tenant_id!r}")
        proposer = proposer_of(signed, principals)
    except SignatureRefused as refused:
        return refused.code
    if proposer.principal_id != withdrawal.principal_id:
        return IdentityReason.SIGNATURE_PRINCIPAL_MISMATCH
    return proposer


def refusal(proposer: Proposer, withdrawal: CallWithdrawal,
            stored: StoredDecision | None) -> str | None:
    """Why the withdrawal ``proposer`` proved it sent does not count for the call ``stored``
    (a reason code), or None when it does."""
    if stored is None or (stored.intent.tenant_id, stored.intent.run_id) != (
            withdrawal.tenant_id, withdrawal.run_id):
        return CALL_UNKNOWN
    if (stored.intent.principal_id, stored.intent.person_id) != (proposer.principal_id,
                                                                 proposer.person_id):
        return NOT_THE_PROPOSER
    if stored.outcome != "awaiting_approval":
        return NOT_AWAITING_APPROVAL
    return None


def withdrawn_by(withdrawal: CallWithdrawal) -> str:
    return f"withdrawn by {withdrawal.principal_id}: {withdrawal.reason}"


async def record(conn: asyncpg.Connection, event_id: uuid.UUID, withdrawal: CallWithdrawal,
                 reason_code: str | None) -> None:
    """Once per event: a redelivered withdrawal is recorded once."""
    await conn.execute(
        f"INSERT INTO {SCHEMA}.withdrawals (event_id, logical_call_id, principal_id, outcome,"
        " reason_code, payload) VALUES ($1, $2, $3, $4, $5, $6::jsonb)"
        " ON CONFLICT (event_id) DO NOTHING", event_id, withdrawal.logical_call_id,
        withdrawal.principal_id, "applied" if reason_code is None else "refused", reason_code,
        json.dumps(withdrawal.model_dump(mode="json")))
