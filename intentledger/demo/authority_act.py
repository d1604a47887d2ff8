"""The demo's fourth act: authority, decided by the example policy (config/policy.example.yaml).

An agent the policy does not name is denied, and nothing is dispatched. A debit over the agent's
cap waits for two people; the requester cannot approve it, and once finance and an operator
have, it is dispatched once. Each approval is signed with its approver's local key
(``identities.py``); the requester's own is refused (it is no approver).
"""

from __future__ import annotations

import asyncio
import uuid

import asyncpg
from intentledger_client import Client

from shared.operator.approve import Answer, send_answer
from shared.topology import LEDGER_APPROVALS
from downstreams.wallet.repository import open_wallet
from shared.config import Endpoints
from shared.messaging.kafka_security import configured
from intentledger.demo.identities import signer
from shared.identity.local import LocalIdentities

OVER_CAP = "520.00"
"""Above the example policy's 500.00 EUR cap for agent-7: two approvals needed."""


async def authority_act(endpoints: Endpoints, pool: asyncpg.Pool,
                        identities: LocalIdentities) -> bool:
    wallet_id = f"tenant/acme/w-demo-{uuid.uuid4().hex[:6]}"
    await open_wallet(pool, wallet_id, "EUR", 100_000)
    denied = await _propose(endpoints, identities, "intern-3", wallet_id, "10.00")
    decision = await _decision(pool, denied)
    print(f"intern-3: debit 10.00 EUR -> policy {decision['outcome']} ({decision['reason_code']}); "
          f"dispatcher calls: {await _dispatched(pool, denied)}")
    gated = await _propose(endpoints, identities, "agent-7", wallet_id, OVER_CAP)
    decision = await _decision(pool, gated)
    print(f"agent-7:  debit {OVER_CAP} EUR -> policy {decision['outcome']} "
          f"(over the 500.00 cap: two people must approve)")
    approvals = []
    for approver in ("agent-7", "finance:ana", "operator:dana"):
        await send_answer(endpoints, Answer(uuid.UUID(gated), granted=True),
                          topic=LEDGER_APPROVALS, signer=signer(identities, approver))
        approvals.append(await _approval_outcome(pool, gated, approver))
        print(f"  approval by {approver:<14} -> {approvals[-1]}")
    state = await _settled(pool, gated)
    debits = await pool.fetchval("SELECT count(*) FROM wallet.debits WHERE wallet_id = $1",
                                 wallet_id)
    print(f"agent-7:  debit {OVER_CAP} EUR -> {state}; wallet debits: {debits}")
    return (decision["outcome"] == "awaiting_approval" and approvals[0].startswith("refused")
            and state == "SUCCEEDED" and debits == 1)


async def _propose(endpoints: Endpoints, identities: LocalIdentities, principal: str,
                   wallet_id: str, amount: str) -> str:
    """In OpenAI chat format, as a model's assistant message carries it; the call's id."""
    call_id = f"call_{uuid.uuid4().hex[:8]}"
    message = {"role": "assistant", "content": None, "tool_calls": [{
        "id": call_id, "type": "function", "function": {
            "name": "wallet_debit",
            "arguments": f'{{"wallet_id": "{wallet_id}", "amount": "{amount}", "currency": "EUR"}}'}}]}
    async with Client(endpoints.kafka_bootstrap, principal_id=principal, tenant_id="acme",
                      signing_key=identities.signing_key(principal),
                      kafka_options=configured().client_kwargs()) as agent:
        [outcome] = await agent.propose_openai_chat(
            f"demo-run-{uuid.uuid4().hex[:8]}", message,
            operation_keys={call_id: f"order-{uuid.uuid4().hex[:6]}:debit"}, wait=60, settle=False)
    return str(outcome.handle.logical_call_id)


async def _decision(pool: asyncpg.Pool, call: str) -> asyncpg.Record:
    async with asyncio.timeout(60):
        while (row := await pool.fetchrow(
                "SELECT outcome, reason_code FROM policy.decisions WHERE logical_call_id = $1",
                uuid.UUID(call))) is None:
            await asyncio.sleep(0.1)
    return row


async def _approval_outcome(pool: asyncpg.Pool, call: str, approver: str) -> str:
    async with asyncio.timeout(60):
        while (row := await pool.fetchrow(
                "SELECT outcome, reason_code FROM policy.approvals WHERE logical_call_id = $1"
                " AND approver_id = $2", uuid.UUID(call), approver)) is None:
            await asyncio.sleep(0.1)
    return row["outcome"] + (f" ({row['reason_code']})" if row["reason_code"] else "")


async def _dispatched(pool: asyncpg.Pool, call: str) -> int:
    return await pool.fetchval("SELECT count(*) FROM dispatcher.calls WHERE logical_call_id = $1",
                               uuid.UUID(call))


async def _settled(pool: asyncpg.Pool, call: str) -> str:
    async with asyncio.timeout(90):
        while (state := await pool.fetchval(
                "SELECT state FROM dispatcher.calls WHERE logical_call_id = $1",
                uuid.UUID(call))) not in ("SUCCEEDED", "FAILED", "MANUAL_REVIEW", "DENIED",
                                          "EXPIRED"):
            await asyncio.sleep(0.2)
    return state
