"""Answering effect and lookup requests: one transaction holds the fence check, the key row,
the domain write and the receipt (written to the outbox), for a whole consumed batch at once:
its rows are locked, read and written through a ``BatchBook`` in a constant number of
statements, and its requests decided in delivery order.

Fault points (docs/design.md §6, enabled through ``shared.faults``):

- ``warehouse.delay`` (``delay:S``) sleeps before any request is looked at;
- ``warehouse.refuse_shipment`` (``drop``) answers a new ``shipment.schedule`` ``rejected`` with
  reason ``carrier_refused`` and applies nothing; the refusal is settled under the key like a
  real business refusal, so a replay gets the same answer (the saga test's failing "ship");
- ``warehouse.after_commit_drop_response`` (``drop``) commits an effect request's outcome and its
  recorded answer but emits no receipt: the caller's "response lost" (docs/design.md §1). A later
  request or lookup under the same key gets the recorded answer, ``replayed=True``;
- ``warehouse.after_commit`` (any action) sits between the database commit and the Kafka offset
  commit (the consumer template's crash point): ``drop`` redelivers the batch.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime

import asyncpg
from pydantic import ValidationError

from downstreams.warehouse import repository as repo
from downstreams.warehouse.batch_book import BatchBook
from downstreams.warehouse.contracts import WarehouseReason
from downstreams.warehouse.operations import OPERATIONS
from downstreams.warehouse.routes import ROUTES
from shared import faults
from shared.contracts.effect_requests import (EFFECT_RECEIPT_ISSUED, EffectLookupRequested,
                                              EffectReceipt, EffectRequested)
from shared.db.unit_of_work import UnitOfWork
from shared.downstream.capability_check import CapabilityCheck, CapabilityReason
from shared.downstream.idempotent_write import recorded_response, request_hash
from shared.ids import new_event_id
from shared.messaging.envelope import Envelope
from shared.messaging.routes import Router
from shared.runs import RunKey

log = logging.getLogger(__name__)
PRODUCER = "warehouse"


class WarehouseInbox:
    """The consumer's set-wise handler; it keeps the capability check every request goes
    through and the routing table's readers."""

    def __init__(self, check: CapabilityCheck) -> None:
        self._check = check
        self._readers = Router(ROUTES)

    async def answer_all(self, uow: UnitOfWork, envelopes: list[Envelope]) -> None:
        """Answer a batch in delivery order; the consumer admitted every envelope's type."""
        for _ in envelopes:
            await faults.hit("warehouse.delay")
        batch = [(envelope, self._readers.target(envelope.event_type)(envelope))
                 for envelope in envelopes]
        requests = [asked for _, asked in batch if isinstance(asked, EffectRequested)]
        book = await BatchBook.load(
            uow.connection, [(RunKey(asked.tenant_id, envelope.run_id), asked.fence)
                             for envelope, asked in batch],
            {r.operation_key: intent_hash(r) for r in reversed(requests)},  # the first's
            [asked.operation_key for _, asked in batch if not isinstance(asked, EffectRequested)],
            requests)
        for envelope, asked in batch:
            if not isinstance(asked, EffectRequested):
                _reply(uow, envelope, asked.reply_topic,
                       answer_lookup(book, envelope.run_id, asked))
                continue
            receipt = await answer(book, envelope.run_id, asked, self._check)
            try:
                await faults.hit("warehouse.after_commit_drop_response")
            except faults.ResponseDropped:
                log.warning("fault: %s answered %s, receipt dropped", asked.operation_key,
                            receipt.status)
                continue
            _reply(uow, envelope, asked.reply_topic, receipt)
        await book.flush(uow.connection)


def _reply(uow: UnitOfWork, envelope: Envelope, topic: str, receipt: EffectReceipt) -> None:
    uow.emit(topic, Envelope.new(
        event_type=EFFECT_RECEIPT_ISSUED, run_id=envelope.run_id, producer=PRODUCER,
        payload=receipt.model_dump(mode="json"), causation=envelope))


async def answer(book: BatchBook, run_id: str, request: EffectRequested,
                 check: CapabilityCheck) -> EffectReceipt:
    """Settle the key once; every later request under it gets the recorded answer.

    Refusals that say nothing about the intent itself (stale fence, a capability that does not
    authorize the request, unsupported tool, invalid arguments, deadline passed) leave the key
    unsettled: the intent may still be carried out by a request that is authorized, fenced,
    supported, well-formed and on time. The capability and the deadline are checked after the
    claim, so a key settled earlier is still answered truthfully (a replay applies
    nothing), and a late claim is released."""
    identity = {"operation_key": request.operation_key, "logical_call_id": request.logical_call_id,
                "attempt": request.attempt}
    keys = book.keys
    if not keys.admit(RunKey(request.tenant_id, run_id), request.fence):
        return EffectReceipt(**identity, status="stale", reason=WarehouseReason.STALE_FENCE)
    operation = OPERATIONS.get((request.tool_name, request.tool_version))
    if operation is None:
        return _refused(identity, WarehouseReason.UNSUPPORTED_TOOL)
    try:
        arguments = operation.arguments.model_validate(request.canonical_arguments)
    except ValidationError as error:
        log.warning("%s: invalid %s arguments: %s", request.operation_key, request.tool_name, error)
        return _refused(identity, WarehouseReason.INVALID_ARGUMENTS)
    claim = keys.claim(request.operation_key, intent_hash(request))
    if claim.status == "replay":
        return _replayed(claim.response, identity)
    if claim.status == "reused":
        return _refused(identity, WarehouseReason.OPERATION_KEY_REUSED)
    refused = check.refusal(request) or (WarehouseReason.DEADLINE_PASSED
                                         if request.deadline_at <= datetime.now(UTC) else None)
    if refused:
        keys.release(request.operation_key)
        return _refused(identity, refused)
    result, reason = await operation.apply(book, arguments, request)
    receipt = EffectReceipt(**identity, status="rejected" if reason else "applied",
                            result=result, reason=reason, receipt_id=new_event_id())
    keys.record(request.operation_key, receipt.model_dump(mode="json"))
    return receipt


def answer_lookup(book: BatchBook, run_id: str, question: EffectLookupRequested) -> EffectReceipt:
    """Reconciliation's "did this key take effect?". It raises the run's fence like a request,
    so once the new owner has asked, no request of an older owner can land afterwards."""
    identity = {"operation_key": question.operation_key,
                "logical_call_id": question.logical_call_id, "attempt": question.attempt}
    if not book.keys.admit(RunKey(question.tenant_id, run_id), question.fence):
        return EffectReceipt(**identity, status="stale", reason=WarehouseReason.STALE_FENCE)
    response = book.keys.recorded(question.operation_key)
    if response is None:
        return EffectReceipt(**identity, status="not_found")
    return _replayed(response, identity)


def _replayed(recorded: dict, identity: dict) -> EffectReceipt:
    """The recorded answer, addressed to the request or lookup that asked now, naming the
    attempt that settled the key."""
    settled_by = recorded.get("settled_by_attempt") or recorded.get("attempt")
    return EffectReceipt.model_validate(recorded | identity | {"replayed": True,
                                                               "settled_by_attempt": settled_by})


def _refused(identity: dict, reason: WarehouseReason | CapabilityReason) -> EffectReceipt:
    return EffectReceipt(**identity, status="rejected", reason=reason)


def intent_hash(request: EffectRequested) -> str:
    """What the intent is; attempt, fence, deadline and reply topic vary between its attempts."""
    return request_hash({"tool_name": request.tool_name, "tool_version": request.tool_version,
                         "canonical_arguments": request.canonical_arguments})


async def stock_sku(pool: asyncpg.Pool, sku: str, available: int) -> bool:
    """Seed a SKU's stock (demo and tests); False when it already exists."""
    async with pool.acquire() as conn:
        return await repo.insert_stock(conn, sku, available)


async def lookup(pool: asyncpg.Pool, operation_key: str) -> EffectReceipt | None:
    """Reconciliation's ``lookup_by_key`` read directly: the recorded answer, or None."""
    async with pool.acquire() as conn:
        response = await recorded_response(conn, repo.SCHEMA, operation_key)
    return EffectReceipt.model_validate(response | {"replayed": True}) if response else None
