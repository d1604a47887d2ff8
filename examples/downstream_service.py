"""A downstream service on the Kafka effect adapter: a ledger of credits, each applied once.

What it shows: the contract a downstream system keeps with the dispatcher
(``shared/contracts/effect_requests.py``, ``schemas/effects.requests.schema.json`` and
``schemas/effects.receipts.schema.json``). Every ``EffectRequested`` on its topic is applied at
most once per operation key, however often it arrives: a retry of the dispatcher, a
redelivery after a crash, or a copy the relay published twice. The key is claimed with the
downstream helper ``shared/downstream/idempotent_write.py`` in the transaction that writes the
credit, so the key and the credit commit together or not at all; a repeat gets the answer
recorded the first time, marked ``replayed``, and writes nothing. Every request and every
``EffectLookupRequested`` (reconciliation's "did this key take effect?") is answered with one
``EffectReceiptIssued`` on the request's ``reply_topic``. Fences (``shared/downstream/
fences.py``) refuse a request from a dispatcher worker that has lost its run's lease, and the
policy's signed capability (``shared/downstream/capability_check.py``, with the policy's public
keys from ``INTENTLEDGER_CAPABILITY_PUBLIC_KEYS_FILE``) refuses a request nobody authorized:
whoever can write into an outbox can make the relay publish anything on this topic, but cannot
sign as the policy.

The receipt is sent after the database commit and the offset is committed after the receipt:
a crash in between redelivers the request, which is then answered from the recorded response.
Nothing is lost and nothing is applied twice; a receipt may arrive twice, and the dispatcher
takes a replayed receipt for what it is.

To have agents' calls reach it, declare the tool in the deployment's registry::

    - name: credits.grant
      version: "1"
      description: Credit an account.
      arguments_schema:
        type: object
        additionalProperties: false
        required: [account_id, amount, currency]
        properties:
          account_id: {type: string, minLength: 1, maxLength: 200}
          amount: {type: [string, number], maxLength: 40}
          currency: {type: string, minLength: 3, maxLength: 3}
      canonical:
        - {path: account_id, kind: tenant_resource}
        - {path: amount, kind: money, currency_field: currency}
      key: {scheme: caller_stated}
      effect: idempotent
      result_schema:
        type: object
        required: [credit_id, balance_minor]
        properties:
          credit_id: {type: string}
          balance_minor: {type: integer}
      result_max_bytes: 1024
      retry:
        max_attempts: 4
        attempt_timeout_seconds: 5
        replay_safe: true
        key_retention_seconds: 2592000  # this service keeps its keys; state what yours keeps
      reconciliation: lookup_by_key
      topic: effects.credits

Run it (``INTENTLEDGER_KAFKA_BOOTSTRAP`` and ``INTENTLEDGER_DATABASE_URL``, else the endpoints
of ``intentledger infra up``, and ``INTENTLEDGER_CAPABILITY_PUBLIC_KEYS_FILE``, the policy's
public keys); it creates its schema and tables on start::

    python examples/downstream_service.py --topic effects.credits --schema credits

It runs until interrupted, or ``--max-messages`` records or ``--timeout`` seconds.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
import time
from datetime import UTC, datetime
from typing import Any

import asyncpg
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRecord
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from shared.config import Settings
from shared.contracts.effect_requests import (EFFECT_LOOKUP_REQUESTED, EFFECT_RECEIPT_ISSUED,
                                              EFFECT_REQUESTED, EffectLookupRequested,
                                              EffectReceipt, EffectRequested)
from shared.db.identifiers import checked_identifier
from shared.downstream.capability_check import CapabilityCheck
from shared.downstream.fences import admit
from shared.downstream.idempotent_write import (claim_key, record_response, recorded_response,
                                                release_key, request_hash)
from shared.errors import PermanentError
from shared.identity import capability_keys
from shared.ids import new_event_id
from shared.messaging.envelope import Envelope, decode
from shared.runs import RunKey
from shared.messaging.kafka_security import client_options

TOOL = "credits.grant"
PRODUCER = "credits-example"
DDL = """
CREATE SCHEMA IF NOT EXISTS {schema};
CREATE TABLE IF NOT EXISTS {schema}.credits (
    credit_id       uuid PRIMARY KEY,
    account_id      text NOT NULL,
    amount_minor    bigint NOT NULL CHECK (amount_minor > 0),
    currency        text NOT NULL,
    operation_key   text NOT NULL UNIQUE,  -- a second guard: one credit per key, whatever else
    logical_call_id uuid NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE IF NOT EXISTS {schema}.idempotency_keys (  -- the helper's table, as it documents
    operation_key text PRIMARY KEY,
    request_hash  text NOT NULL,
    response      jsonb,
    created_at    timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE IF NOT EXISTS {schema}.fences (scope text PRIMARY KEY, fence bigint NOT NULL);
"""


class Credit(BaseModel):
    """The canonical arguments the intake made of the agent's: money in integer minor units."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    account_id: str = Field(min_length=1, max_length=200)
    amount: int = Field(gt=0)
    currency: str = Field(pattern=r"^[A-Z]{3}$")


async def answer(conn: asyncpg.Connection, schema: str, run_id: str, request: EffectRequested,
                 check: CapabilityCheck) -> EffectReceipt:
    """Settle the key at most once, in the caller's transaction; the order of checks matters:
    a stale fence reads nothing, and a settled key is answered before the request is judged
    (refusing it now would deny an effect that exists)."""
    if not await admit(conn, schema, RunKey(request.tenant_id, run_id), request.fence):
        return receipt(request, "stale", reason="stale_fence")
    claim = await claim_key(conn, schema, request.operation_key, intent_hash(request))
    if claim.status == "replay":
        return replayed(request, claim.response)
    if claim.status == "reused":
        return receipt(request, "rejected", reason="operation_key_reused",
                       receipt_id=new_event_id())
    credit = check.refusal(request) or admissible(request)
    if isinstance(credit, str):  # this request is refused, not the intent: leave the key free
        await release_key(conn, schema, request.operation_key)
        return receipt(request, "rejected", reason=credit, receipt_id=new_event_id())
    result = await write_credit(conn, schema, request, credit)
    settled = receipt(request, "applied", result=result, receipt_id=new_event_id())
    await record_response(conn, schema, request.operation_key, settled.model_dump(mode="json"))
    return settled


async def answer_lookup(conn: asyncpg.Connection, schema: str, run_id: str,
                        lookup: EffectLookupRequested) -> EffectReceipt:
    """The recorded answer, or ``not_found``; the fence is raised first, so once a new owner
    has asked, no request of the old one can land after the answer."""
    if not await admit(conn, schema, RunKey(lookup.tenant_id, run_id), lookup.fence):
        return receipt(lookup, "stale", reason="stale_fence")
    response = await recorded_response(conn, schema, lookup.operation_key)
    return replayed(lookup, response) if response else receipt(lookup, "not_found")


def admissible(request: EffectRequested) -> Credit | str:
    """The credit asked for, or the reason code of a refusal of this request."""
    if request.tool_name != TOOL:
        return "unsupported_tool"
    if request.deadline_at <= datetime.now(UTC):
        return "deadline_passed"  # the dispatcher stopped waiting; it will reconcile
    try:
        return Credit.model_validate(request.canonical_arguments)
    except ValidationError:
        return "invalid_arguments"


async def write_credit(conn: asyncpg.Connection, schema: str, request: EffectRequested,
                       credit: Credit) -> dict[str, Any]:
    credit_id = new_event_id()
    await conn.execute(
        f"INSERT INTO {schema}.credits (credit_id, account_id, amount_minor, currency, "
        "operation_key, logical_call_id) VALUES ($1, $2, $3, $4, $5, $6)", credit_id,
        credit.account_id, credit.amount, credit.currency, request.operation_key,
        request.logical_call_id)
    balance = await conn.fetchval(
        f"SELECT sum(amount_minor) FROM {schema}.credits WHERE account_id = $1 "
        "AND currency = $2", credit.account_id, credit.currency)
    return {"credit_id": str(credit_id), "balance_minor": int(balance)}


def intent_hash(request: EffectRequested) -> str:
    """What the intent is: attempt, fence, deadline and reply topic differ between attempts."""
    return request_hash({"tool_name": request.tool_name, "tool_version": request.tool_version,
                         "canonical_arguments": request.canonical_arguments})


def receipt(asked: EffectRequested | EffectLookupRequested, status: str,
            **fields: Any) -> EffectReceipt:
    return EffectReceipt(operation_key=asked.operation_key, logical_call_id=asked.logical_call_id,
                         attempt=asked.attempt, status=status, **fields)


def replayed(asked: EffectRequested | EffectLookupRequested,
             recorded: dict[str, Any]) -> EffectReceipt:
    """The recorded answer, addressed to the attempt that asks now."""
    return receipt(asked, recorded["status"], replayed=True, result=recorded.get("result"),
                   reason=recorded.get("reason"), receipt_id=recorded.get("receipt_id"),
                   settled_by_attempt=recorded.get("settled_by_attempt") or recorded["attempt"])


class Service:
    def __init__(self, pool: asyncpg.Pool, producer: AIOKafkaProducer, schema: str,
                 check: CapabilityCheck) -> None:
        self._pool, self._producer, self._schema, self._check = pool, producer, schema, check

    async def handle(self, record: ConsumerRecord) -> None:
        """Answer one record; a record that can never be answered is reported and skipped
        (retrying the same bytes cannot help, and it must not block the partition)."""
        try:
            envelope = decode(record.value, record.headers)
            asked, reply = await self._settle(envelope)
        except (PermanentError, ValidationError) as error:
            print(f"skipped {record.topic}:{record.partition}:{record.offset}: {error}",
                  file=sys.stderr)
            return
        await self._producer.send_and_wait(
            asked.reply_topic, reply.value(), key=envelope.run_id.encode(),
            headers=[(name, value.encode()) for name, value in reply.headers().items()])
        payload = reply.payload
        print(json.dumps({"operation_key": payload["operation_key"], "status": payload["status"],
                          "replayed": payload["replayed"], "result": payload["result"]}),
              flush=True)

    async def _settle(self, envelope: Envelope) -> tuple[Any, Envelope]:
        async with self._pool.acquire() as conn, conn.transaction():
            if envelope.event_type == EFFECT_REQUESTED:
                asked = EffectRequested.model_validate(envelope.payload)
                answered = await answer(conn, self._schema, envelope.run_id, asked, self._check)
            elif envelope.event_type == EFFECT_LOOKUP_REQUESTED:
                asked = EffectLookupRequested.model_validate(envelope.payload)
                answered = await answer_lookup(conn, self._schema, envelope.run_id, asked)
            else:
                raise PermanentError(f"not an effect request: {envelope.event_type}")
        return asked, Envelope.new(event_type=EFFECT_RECEIPT_ISSUED, run_id=envelope.run_id,
                                   producer=PRODUCER, payload=answered.model_dump(mode="json"),
                                   causation=envelope)


async def serve(args: argparse.Namespace) -> int:
    schema = checked_identifier(args.schema)
    settings = Settings()
    endpoints = settings.endpoints
    check = CapabilityCheck(capability_keys.public_keys(settings))
    pool = await asyncpg.create_pool(endpoints.database_url, min_size=1, max_size=2)
    kafka = client_options(endpoints.kafka_bootstrap)
    producer = AIOKafkaProducer(**kafka, acks="all", enable_idempotence=True)
    consumer = AIOKafkaConsumer(args.topic, **kafka, group_id=args.group,
                                enable_auto_commit=False, auto_offset_reset="earliest")
    try:
        await pool.execute(DDL.format(schema=schema))
        await producer.start()
        await consumer.start()
        await consume(consumer, Service(pool, producer, schema, check), args)
    finally:
        await consumer.stop()
        await producer.stop()
        await pool.close()
    return 0


async def consume(consumer: AIOKafkaConsumer, service: Service, args: argparse.Namespace) -> None:
    """One record at a time, the offset committed only once its receipt is sent."""
    stopping = asyncio.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        asyncio.get_running_loop().add_signal_handler(signum, stopping.set)
    deadline = time.monotonic() + (args.timeout or float("inf"))
    consumed = 0
    while not stopping.is_set() and (not args.max_messages or consumed < args.max_messages):
        left = deadline - time.monotonic()
        if left <= 0:
            return
        batch = await consumer.getmany(timeout_ms=int(min(left, 1.0) * 1000), max_records=1)
        for records in batch.values():
            for record in records:
                await service.handle(record)
                consumed += 1
        if batch:
            await consumer.commit()


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topic", default="effects.credits", help="the tool's request topic")
    parser.add_argument("--group", default="credits", help="this service's consumer group")
    parser.add_argument("--schema", default="credits", help="its PostgreSQL schema")
    parser.add_argument("--max-messages", type=int, default=0, help="stop after this many "
                        "records (0: never)")
    parser.add_argument("--timeout", type=float, default=0.0, help="stop after this long, in "
                        "seconds (0: never)")
    return parser.parse_args()


if __name__ == "__main__":
    sys.exit(asyncio.run(serve(arguments())))
