"""The demo's second act: an agent proposes a wallet debit three times through the SDK, each
record signed with its key."""

from __future__ import annotations

import uuid

from intentledger_client import Client, Outcome

from shared.config import Endpoints
from shared.messaging.kafka_security import configured
from shared.identity.local import LocalIdentities


async def propose_act(endpoints: Endpoints, identities: LocalIdentities) -> bool:
    run = f"demo-run-{uuid.uuid4().hex[:8]}"
    key = f"order-{uuid.uuid4().hex[:6]}:debit"
    key_id = identities.signing_key("user-42").kid
    print(f"agent: user-42 signs every record with key {key_id} (the intake refuses unsigned ones)")
    async with Client(endpoints.kafka_bootstrap, principal_id="user-42", tenant_id="acme",
                      signing_key=identities.signing_key("user-42"),
                      kafka_options=configured().client_kwargs()) as agent:
        first = await agent.call(run, "wallet.debit", {"wallet_id": "w-1", "amount": "40.00",
                                                       "currency": "EUR"},
                                 call_id="call-1", operation_key=key, wait=60, settle=False)
        _show("debit 40.00 EUR", first)
        again = await agent.call(run, "wallet.debit", {"currency": "eur", "amount": 40,
                                                       "wallet_id": "w-1"},
                                 call_id="call-2-regenerated", operation_key=key, wait=60,
                                 settle=False)
        _show("same intent, spelled differently, new provider call id", again)
        changed = await agent.call(run, "wallet.debit", {"wallet_id": "w-1", "amount": "41.00",
                                                         "currency": "EUR"},
                                   call_id="call-3", operation_key=key, wait=60, settle=False)
        _show("same key, different amount", changed)
    return [_intake_said(o) for o in (first, again, changed)] == [
        "accepted", "duplicate", "operation_key_conflict"] and \
        again.handle.logical_call_id == first.handle.logical_call_id is not None


def _intake_said(outcome: Outcome) -> str | None:
    """The intake's answer, which this act is about. A call's settled state may already have
    been read with it (the policy denies user-42's debits within milliseconds) and is then the
    outcome's ``ledger_status``; the answer stays what the intake said."""
    answer = outcome.answer
    if answer is None:
        return None
    return answer.reason_code if answer.outcome == "rejected" else answer.outcome


def _show(what: str, outcome: Outcome) -> None:
    detail = (outcome.answer.reason_code if outcome.answer and outcome.answer.reason_code
              else outcome.handle.logical_call_id)
    said = outcome.answer.outcome if outcome.answer else "pending"
    print(f"agent: {what:<55} -> {said} ({detail})")
