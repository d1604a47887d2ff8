"""The demo's second act: an agent proposes a wallet debit three times through the SDK, each
record signed with its key."""

from __future__ import annotations

import uuid

from shared.client import ProposalClient
from shared.config import Endpoints
from shared.identity.local import LocalIdentities


async def propose_act(endpoints: Endpoints, identities: LocalIdentities) -> bool:
    run = f"demo-run-{uuid.uuid4().hex[:8]}"
    key = f"order-{uuid.uuid4().hex[:6]}:debit"
    key_id = identities.signing_key("user-42").kid
    print(f"agent: user-42 signs every record with key {key_id} (the intake refuses unsigned ones)")
    async with ProposalClient(endpoints.kafka_bootstrap, run_id=run, principal_id="user-42",
                              tenant_id="acme", signing_key=identities.signing_key("user-42")) as agent:
        first = await agent.propose("wallet.debit", {"wallet_id": "w-1", "amount": "40.00",
                                                     "currency": "EUR"},
                                    call_id="call-1", operation_key=key, timeout=60)
        _show("debit 40.00 EUR", first)
        again = await agent.propose("wallet.debit", {"currency": "eur", "amount": 40,
                                                     "wallet_id": "w-1"},
                                    call_id="call-2-regenerated", operation_key=key, timeout=60)
        _show("same intent, spelled differently, new provider call id", again)
        changed = await agent.propose("wallet.debit", {"wallet_id": "w-1", "amount": "41.00",
                                                       "currency": "EUR"},
                                      call_id="call-3", operation_key=key, timeout=60)
        _show("same key, different amount", changed)
    return (first.status, again.status, changed.reason_code) == (
        "accepted", "duplicate", "operation_key_conflict") and \
        again.payload.get("logical_call_id") == first.payload.get("logical_call_id")


def _show(what: str, outcome) -> None:
    detail = outcome.reason_code or outcome.payload.get("logical_call_id")
    print(f"agent: {what:<55} -> {outcome.status} ({detail})")
