"""The demo's third act: docs/design.md §1 on the real stack. The wallet commits a debit and its
answer is lost, the dispatcher dies right after sending; the restarted dispatcher takes the run
over, calls the attempt UNKNOWN, looks the operation key up and records the one debit that
exists."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Callable
from subprocess import Popen

import asyncpg
from intentledger_client import Client

from downstreams.wallet.repository import open_wallet
from shared import faults
from shared.config import Endpoints
from shared.messaging.kafka_security import configured
from shared.identity.local import LocalIdentities

WALLET_FAULTS = {"INTENTLEDGER_WALLET_FAULTS": "wallet.after_commit_drop_response=drop@1"}
DISPATCHER_FAULTS = {"INTENTLEDGER_FAULTS": "dispatcher.after_send_before_record=exit@1"}
DISPATCHER_TUNING = {"INTENTLEDGER_DISPATCHER_LEASE_TTL_S": "3"}
"""A dead dispatcher's runs are taken over after its lease lapses: 3 s keeps the demo short."""

StartDispatcher = Callable[[dict[str, str]], Popen]


async def crash_story(endpoints: Endpoints, pool: asyncpg.Pool, dying: Popen,
                      start_dispatcher: StartDispatcher, identities: LocalIdentities) -> bool:
    wallet_id = f"tenant/acme/w-demo-{uuid.uuid4().hex[:6]}"
    await open_wallet(pool, wallet_id, "EUR", 10_000)
    key = f"order-{uuid.uuid4().hex[:6]}:debit"
    print(f"wallet {wallet_id}: 100.00 EUR; the wallet will commit and drop its first answer,\n"
          "the dispatcher will exit right after its first send (fault points, docs/design.md §6)")
    run_id = f"demo-run-{uuid.uuid4().hex[:8]}"
    async with Client(endpoints.kafka_bootstrap, principal_id="agent-7", tenant_id="acme",
                      signing_key=identities.signing_key("agent-7"),
                      kafka_options=configured().client_kwargs()) as agent:
        [outcome] = await agent.propose_openai_chat(
            run_id, {"role": "assistant", "content": None, "tool_calls": [{
                "id": "call_crash_1", "type": "function", "function": {
                    "name": "wallet_debit",
                    "arguments": json.dumps({"wallet_id": wallet_id, "amount": "40.00",
                                             "currency": "EUR"})}}]},
            operation_keys={"call_crash_1": key}, wait=60, settle=False)
    call_id = outcome.handle.logical_call_id and str(outcome.handle.logical_call_id)
    answered = outcome.ledger_status or "pending"
    print(f"agent (OpenAI tool call wallet_debit): debit 40.00 EUR -> {answered} ({call_id})")
    if answered != "accepted":
        return False
    exit_code = await asyncio.to_thread(dying.wait, 60)
    print(f"dispatcher exited with {exit_code} at dispatcher.after_send_before_record "
          f"({'the injected crash' if exit_code == faults.EXIT_CODE else 'UNEXPECTED'})")
    state = await _state(pool, call_id)
    print(f"the call is {state}; wallet debits so far: {await _debits(pool, wallet_id)} (the request "
          "is an outbox row: the relay delivers it although its sender is dead)")
    start_dispatcher(DISPATCHER_TUNING)  # stopped with the other services at the end
    state = await _settled(pool, call_id, timeout=90)
    for row in await pool.fetch("SELECT attempt, kind, fence, status, detail FROM dispatcher.attempts"
                                " WHERE logical_call_id = $1 ORDER BY attempt", uuid.UUID(call_id)):
        print(f"  attempt {row['attempt']}: {row['kind']:<6} fence {row['fence']}  "
              f"{row['status']:<8} {row['detail']}")
    debits = await _debits(pool, wallet_id)
    balance = await pool.fetchval("SELECT balance_minor FROM wallet.wallets WHERE id = $1", wallet_id)
    print(f"call {state}; wallet debits: {debits}; balance {balance / 100:.2f} EUR")
    print("what did NOT happen: a blind retry under a new identity would have debited again "
          "(20.00 EUR left);\nthe restarted dispatcher asked the wallet by operation key instead")
    ok = exit_code == faults.EXIT_CODE and state == "SUCCEEDED" and debits == 1 and balance == 6000
    print("one intent, one debit, reconciled" if ok else "UNEXPECTED: see the logs")
    return ok and await _what_an_operator_sees(pool, run_id)


async def _what_an_operator_sees(pool: asyncpg.Pool, run_id: str) -> bool:
    """The run as the projection recorded it (who, which policy, which worker and fence, which
    attempt, which receipt), and a replay of its history to the same hash."""
    from services.projection.replay import replay
    from services.query.cli import runs_show
    from shared.runs import RunKey
    from shared.config import Settings

    async with asyncio.timeout(60):
        while await pool.fetchval("SELECT status FROM projection.runs WHERE run_id = $1",
                                  run_id) != "completed":
            await asyncio.sleep(0.2)
    print(f"\n$ intentledger runs show {run_id} --tenant acme")
    await runs_show(Settings(), RunKey("acme", run_id), as_json=False)
    verdict = await replay(pool, [run_id])
    print(f"\n$ intentledger replay --run {run_id} --verify\nlive {verdict.live_hash}\n"
          f"replay {verdict.replayed_hash}: {'equal' if verdict.agrees else 'DIFFERENT'}")
    return verdict.agrees


async def _state(pool: asyncpg.Pool, call_id: str) -> str | None:
    return await pool.fetchval("SELECT state FROM dispatcher.calls WHERE logical_call_id = $1",
                               uuid.UUID(call_id))


async def _settled(pool: asyncpg.Pool, call_id: str, timeout: float) -> str | None:
    async with asyncio.timeout(timeout):
        while (state := await _state(pool, call_id)) not in ("SUCCEEDED", "FAILED",
                                                             "MANUAL_REVIEW", "DENIED", "EXPIRED"):
            await asyncio.sleep(0.2)
    return state


async def _debits(pool: asyncpg.Pool, wallet_id: str) -> int:
    return await pool.fetchval("SELECT count(*) FROM wallet.debits WHERE wallet_id = $1", wallet_id)
