"""Withdrawing a caller's call that awaits approval (``tasks/cancel``): a ``CallWithdrawal`` on
``ledger.approvals``, signed by the gateway naming the caller, as its proposals are.

The policy counts it only if the signature proves the call's own proposer sends it and the call
still waits (``services/policy/withdrawals.py``); the gateway's word is the caller's only
because the gateway may propose for it, and its key cannot sign anyone's approval (it has no
``approver`` role and may not publish for people). A cancel is rare: each publishes with a
producer of its own, like an operator's command.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from intentledger_client import Handle

from services.mcp_gateway.callers import Caller
from shared.contracts.withdrawals import CALL_WITHDRAWAL_REQUESTED, CallWithdrawal
from shared.identity.signatures import WITHDRAWAL, SigningKey, sign
from shared.messaging.envelope import Envelope
from shared.operator.publish import publish

PRODUCER = "mcp-gateway"


@dataclass(frozen=True)
class Withdrawer:
    bootstrap: str
    topic: str
    gateway_id: str
    key: SigningKey

    async def withdraw(self, caller: Caller, handle: Handle, reason: str) -> None:
        """``handle``: of a call the intake accepted (its ``logical_call_id`` is known)."""
        if handle.logical_call_id is None:
            raise ValueError("a call the intake has not answered cannot be withdrawn")
        run_id = handle.intent_run_id or handle.run_id
        withdrawal = CallWithdrawal(
            tenant_id=caller.tenant_id, run_id=run_id, logical_call_id=handle.logical_call_id,
            principal_id=caller.principal_id, reason=reason, decided_at=datetime.now(UTC))
        envelope = Envelope.new(event_type=CALL_WITHDRAWAL_REQUESTED, run_id=run_id,
                                producer=PRODUCER, payload=withdrawal.model_dump(mode="json"))
        await publish(self.bootstrap, self.topic, envelope, signature=sign(
            envelope.value(), self.key, principal_id=self.gateway_id,
            tenant_id=caller.tenant_id, use=WITHDRAWAL, agent=caller.principal_id,
            person=caller.person_id))
