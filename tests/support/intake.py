"""Driving the proposal intake as an agent would: raw JSON on agent.proposals, answers read
back from the tenant's agent.results.<tenant> (the relay publishes them)."""

from __future__ import annotations

import json
import time
import uuid

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from services.proposal_intake.main import run_intake
from services.proposal_intake.repository import SCHEMA
from shared.config import Endpoints
from shared.identity.signatures import HEADER
from shared.topology import AGENT_PROPOSALS, LEDGER_INTAKE, results_topic
from tests.support.identities import signature
from tests.support.kafka import topic_exists
from tests.support.services import running_service


def running_intake(endpoints: Endpoints):
    """The intake and a relay for its outbox, both in this event loop."""
    return running_service(endpoints, SCHEMA, lambda settings, stopping: run_intake(
        settings, stopping=stopping))


async def send(bootstrap: str, *messages: dict | bytes, key: str = "agent",
               signed: bool = True, signer: tuple[str, str] | None = None) -> None:
    """Each message as an agent sends it: signed by the principal and for the tenant its body
    names (or ``signer``: principal, tenant), unless ``signed`` is False."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", enable_idempotence=True)
    await producer.start()
    try:
        for message in messages:
            value = message if isinstance(message, bytes) else json.dumps(message).encode()
            headers = [(HEADER, signature(value, *(signer or ())))] if signed else None
            await producer.send_and_wait(AGENT_PROPOSALS, value, key=key.encode(), headers=headers)
    finally:
        await producer.stop()


async def answers(bootstrap: str, run_id: str, count: int, *, tenant: str = "acme",
                  topic: str | None = None, timeout: float = 60.0) -> list[dict]:
    """The envelopes for ``run_id`` on the topic (by default the tenant's results topic),
    waiting until ``count`` have arrived."""
    topic = topic or results_topic(tenant)
    deadline = time.monotonic() + timeout
    if not await topic_exists(bootstrap, topic, timeout=timeout):
        return []
    consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=None,
                                auto_offset_reset="earliest", enable_auto_commit=False)
    await consumer.start()
    found: list[dict] = []
    try:
        while len(found) < count and time.monotonic() < deadline:
            batch = await consumer.getmany(timeout_ms=300, max_records=5000)
            for records in batch.values():
                found += [e for e in map(_envelope, records) if e.get("run_id") == run_id]
    finally:
        await consumer.stop()
    return found


def _envelope(record) -> dict:
    """The shared topics also carry other tests' records, and the poison a fault protocol
    publishes on purpose: anything that is not a JSON object is nobody's answer here."""
    try:
        value = json.loads(record.value or b"")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


async def ledger(bootstrap: str, run_id: str, count: int) -> list[dict]:
    return await answers(bootstrap, run_id, count, topic=LEDGER_INTAKE)


def new_run() -> str:
    return f"run-{uuid.uuid4().hex[:12]}"


def generic(run_id: str, call_id: str = "call-1", *, tool: str = "wallet.debit",
            arguments: dict | None = None, operation_key: str | None = "order-7:debit",
            tenant: str = "acme", **extra) -> dict:
    message = {
        "format": "generic", "run_id": run_id, "principal_id": "user-42", "tenant_id": tenant,
        "tool": tool, "tool_version": "1", "call_id": call_id,
        "arguments": arguments or {"wallet_id": "w-1", "amount": "40.00", "currency": "EUR"},
        **extra,
    }
    if operation_key is not None:
        message["operation_key"] = f"{run_id}:{operation_key}"  # keys are tenant-wide: keep tests apart
    return message
