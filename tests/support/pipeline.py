"""What the pipeline tests send and read: agents' raw proposals, people's approvals, and each
service's own records (intake answers, policy decisions, dispatcher calls), read independently
of the code under test."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta

from aiokafka import AIOKafkaProducer

from shared.identity.signatures import HEADER
from tests.support.identities import signature

from shared.contracts.approvals import APPROVAL_GRANTED, ApprovalDecision
from shared.messaging.envelope import Envelope
from shared.identity.signatures import APPROVAL
from shared.operator.publish import publish
from tests.support.identities import signer
from tests.support.dispatch import Stage, attempts
from tests.support.kafka import wait_for
from tests.support.wallet import balance, debits, debits_under


def names() -> tuple[str, str]:
    """A run and a principal of this test only (policy limits count per principal)."""
    tag = uuid.uuid4().hex[:10]
    return f"run-{tag}", tag


def debit(run_id: str, principal: str, wallet_id: str, amount: str, *, call_id: str,
          key: str, tool: str = "wallet.debit", arguments: dict | None = None,
          tenant: str = "acme") -> dict:
    """A generic-format proposal, as any agent can publish it without our SDK."""
    return {"format": "generic", "run_id": run_id, "principal_id": principal, "tenant_id": tenant,
            "tool": tool, "tool_version": "1", "call_id": call_id,
            "operation_key": f"{run_id}:{key}",  # caller-stated keys are tenant-wide
            "arguments": arguments or {"wallet_id": wallet_id, "amount": amount, "currency": "EUR"}}


async def propose(stage: Stage, *messages: dict, traceparent: str | None = None) -> None:
    """Raw JSON on the proposals topic, as an agent without our SDK sends it, signed by the
    principal it names; ``traceparent`` is the agent's W3C trace context, a record header."""
    producer = AIOKafkaProducer(bootstrap_servers=stage.endpoints.kafka_bootstrap, acks="all",
                                enable_idempotence=True)
    traced = [("traceparent", traceparent.encode())] if traceparent else []
    await producer.start()
    try:
        for message in messages:
            value = json.dumps(message).encode()
            await producer.send_and_wait(stage.proposals, value, key=message["run_id"].encode(),
                                         headers=[(HEADER, signature(value)), *traced])
    finally:
        await producer.stop()


async def approve(stage: Stage, intent: dict, approver: str, **changes) -> Envelope:
    """An approver's grant on the approvals topic, signed with the approver's session key;
    ``intent`` is the intake's answer payload."""
    now = datetime.now(UTC)
    fields = {"decision": "granted", "run_id": intent["run_id"], "tenant_id": "acme",
              "logical_call_id": intent["logical_call_id"],
              "operation_key": intent["operation_key"],
              "arguments_hash": intent["arguments_hash"], "approver_id": approver,
              "decided_at": now, "expires_at": now + timedelta(minutes=10)}
    envelope = Envelope.new(event_type=APPROVAL_GRANTED, run_id=intent["run_id"], producer="test",
                            payload=ApprovalDecision(**fields | changes).model_dump(mode="json"))
    await publish(stage.endpoints.kafka_bootstrap, stage.approvals, envelope,
                  signature=signer(approver).signature(envelope.value(), tenant_id="acme",
                                                       use=APPROVAL))
    return envelope


async def answer(pool, stage: Stage, run_id: str, call_id: str, *, tenant: str = "acme") -> dict:
    """The intake's answer to one proposed call, as its outbox recorded it for the agent (on
    its tenant's results topic)."""
    async def found():
        return await pool.fetchval(
            "SELECT envelope FROM proposal_intake.outbox WHERE topic = $1"
            " AND envelope->'payload'->>'run_id' = $2 AND envelope->'payload'->>'call_id' = $3",
            stage.results_topic(tenant), run_id, call_id)
    envelope = await wait_for(found, timeout=60)
    assert envelope is not None, f"the intake never answered {call_id} of {run_id}"
    return json.loads(envelope)


async def decision(pool, logical_call_id: str, outcome: str) -> dict:
    async def found():
        return await pool.fetchrow("SELECT * FROM policy.decisions WHERE logical_call_id = $1"
                                   " AND outcome = $2", uuid.UUID(logical_call_id), outcome)
    row = await wait_for(found, timeout=60)
    assert row is not None, f"no {outcome} decision for {logical_call_id}"
    return dict(row)


async def approval_outcome(pool, event: Envelope) -> tuple[str, str | None]:
    async def found():
        return await pool.fetchrow("SELECT outcome, reason_code FROM policy.approvals"
                                   " WHERE approval_event_id = $1", event.event_id)
    row = await wait_for(found, timeout=60)
    assert row is not None, f"approval {event.event_id} was never recorded"
    return row["outcome"], row["reason_code"]


async def consumed(pool, consumer: str, event_id) -> None:
    """Wait until ``consumer`` (a service name, also its schema's inbox key) applied the event."""
    schema = consumer.replace("-", "_")

    async def found():
        return await pool.fetchval(f"SELECT true FROM {schema}.inbox WHERE consumer = $1"
                                   " AND event_id = $2", consumer, uuid.UUID(str(event_id)))
    assert await wait_for(found, timeout=60), f"{consumer} never applied event {event_id}"


async def intake_event_seen_by_policy(pool, stage: Stage, run_id: str, call_id: str) -> None:
    event_id = await pool.fetchval(
        "SELECT event_id FROM proposal_intake.outbox WHERE topic = $1"
        " AND envelope->'payload'->>'run_id' = $2 AND envelope->'payload'->>'call_id' = $3",
        stage.intake, run_id, call_id)
    await consumed(pool, "policy", event_id)


async def policy_event_seen_by_dispatcher(pool, stage: Stage, logical_call_id: str) -> None:
    event_id = await pool.fetchval(
        "SELECT event_id FROM policy.outbox WHERE topic = $1"
        " AND envelope->'payload'->'intent'->>'logical_call_id' = $2"
        " ORDER BY position DESC LIMIT 1",
        stage.authorizations, logical_call_id)
    assert event_id is not None, f"the policy announced nothing for {logical_call_id}"
    await consumed(pool, "dispatcher", event_id)


async def dispatched_in(pool, run_id: str) -> list[uuid.UUID]:
    rows = await pool.fetch("SELECT logical_call_id FROM dispatcher.calls WHERE run_id = $1",
                            run_id)
    return [row["logical_call_id"] for row in rows]


async def dispatched(pool, logical_call_id: uuid.UUID) -> int:
    return await pool.fetchval("SELECT count(*) FROM dispatcher.calls WHERE logical_call_id = $1",
                               logical_call_id)


async def rows_of_run(pool, table: str, run_id: str) -> int:
    return await pool.fetchval(f"SELECT count(*) FROM {table} WHERE run_id = $1", run_id)


async def nothing_dispatched(pool, logical_call_id: str, operation_key: str, wallet_id: str,
                             opening_balance: int) -> None:
    """Invariant 4 for one intent: no dispatcher call, no attempt, no debit."""
    call = uuid.UUID(logical_call_id)
    assert await dispatched(pool, call) == 0
    assert await attempts(pool, call) == []
    assert await debits_under(pool, operation_key) == 0
    assert (await debits(pool, wallet_id), await balance(pool, wallet_id)) == (0, opening_balance)


async def committed_effects(pool, logical_call_id: uuid.UUID) -> list[dict]:
    """⚑ ledger.effects events for one call, as the dispatcher's outbox recorded them."""
    rows = await pool.fetch("SELECT envelope FROM dispatcher.outbox WHERE topic LIKE 'ledger.effects%'"
                            " AND envelope->'payload'->>'logical_call_id' = $1",
                            str(logical_call_id))
    return [json.loads(row["envelope"])["payload"] for row in rows]
