"""Applying effect requests: one transaction holds the key row, the domain write and the receipt.

Fault points (DESIGN.md §6, enabled through ``shared.faults``):
``wallet.delay`` (``delay:S``) before applying; ``wallet.fail`` (``drop``) refuses with a
transient error, so the batch rolls back and Kafka redelivers it;
``wallet.after_commit_drop_response`` (``drop``) commits the effect and its recorded answer
but emits no receipt: the caller's "response lost" (DESIGN.md §1). A later request under the
same key gets the recorded answer, ``replayed=True``.
"""

from __future__ import annotations

import logging

import asyncpg
from pydantic import ValidationError

from services.wallet import repository as repo
from services.wallet.contracts import (EFFECT_RECEIPT_ISSUED, EFFECT_REQUESTED, DebitArguments,
                                       EffectReceipt, EffectRequested, RefundArguments,
                                       WalletReason)
from services.wallet.domain import debit_refusal, refund_refusal, tenant_of
from services.wallet.idempotent_write import (claim_key, record_response, recorded_response,
                                              request_hash)
from shared import faults
from shared.db.unit_of_work import UnitOfWork
from shared.errors import PermanentError, RetryableError
from shared.ids import new_event_id
from shared.messaging.envelope import Envelope

log = logging.getLogger(__name__)
PRODUCER = "wallet"


async def handle_effect_request(uow: UnitOfWork, envelope: Envelope) -> None:
    request = _request(envelope)
    await faults.hit("wallet.delay")
    try:
        await faults.hit("wallet.fail")
    except faults.ResponseDropped:
        raise RetryableError("injected transient wallet failure") from None
    receipt = await answer(uow.connection, request)
    try:
        await faults.hit("wallet.after_commit_drop_response")
    except faults.ResponseDropped:
        log.warning("fault: %s settled, receipt dropped", request.operation_key)
        return
    uow.emit(request.reply_topic, Envelope.new(
        event_type=EFFECT_RECEIPT_ISSUED, run_id=envelope.run_id, producer=PRODUCER,
        payload=receipt.model_dump(mode="json"), causation=envelope))


async def answer(conn: asyncpg.Connection, request: EffectRequested) -> EffectReceipt:
    """Settle the key once; every later request under it gets the recorded answer."""
    identity = {"operation_key": request.operation_key, "logical_call_id": request.logical_call_id,
                "attempt": request.attempt}
    claim = await claim_key(conn, repo.SCHEMA, request.operation_key, _request_hash(request))
    if claim.status == "replay":
        return EffectReceipt.model_validate(claim.response | identity | {"replayed": True})
    if claim.status == "reused":
        return EffectReceipt(**identity, status="rejected", replayed=False,
                             reason=WalletReason.OPERATION_KEY_REUSED, receipt_id=new_event_id())
    result, reason = await _apply(conn, request)
    receipt = EffectReceipt(**identity, status="rejected" if reason else "applied",
                            replayed=False, result=result, reason=reason, receipt_id=new_event_id())
    await record_response(conn, repo.SCHEMA, request.operation_key, receipt.model_dump(mode="json"))
    return receipt


async def _apply(conn: asyncpg.Connection, request: EffectRequested):
    if request.tool_name == "wallet.debit":
        args = _arguments(DebitArguments, request)
        wallet = await repo.wallet_for_update(conn, args.wallet_id)
        if reason := debit_refusal(wallet, args.amount, args.currency):
            return None, reason
        debit_id = str(new_event_id())
        await repo.insert_debit(conn, debit_id, wallet, args.amount, request)
        balance = await repo.change_balance(conn, wallet, -args.amount)
        return {"debit_id": debit_id, "balance_minor": balance}, None
    args = _arguments(RefundArguments, request)
    wallet = await repo.wallet_for_update(conn, args.wallet_id)
    debit = await repo.debit_for_update(conn, args.debit_id) if wallet else None
    if reason := refund_refusal(wallet, debit, args.amount, args.currency):
        return None, reason
    refund_id = str(new_event_id())
    await repo.insert_refund(conn, refund_id, debit, args.amount, request)
    balance = await repo.change_balance(conn, wallet, args.amount)
    return {"refund_id": refund_id, "balance_minor": balance}, None


def _request(envelope: Envelope) -> EffectRequested:
    if envelope.event_type != EFFECT_REQUESTED:
        raise PermanentError(f"the wallet answers {EFFECT_REQUESTED}, not {envelope.event_type}")
    try:
        return EffectRequested.model_validate(envelope.payload)
    except ValidationError as error:
        raise PermanentError(f"not an effect request: {error}") from error


def _arguments(model, request: EffectRequested):
    try:
        return model.model_validate(request.canonical_arguments)
    except ValidationError as error:
        raise PermanentError(f"{request.tool_name} arguments: {error}") from error


def _request_hash(request: EffectRequested) -> str:
    """What the intent is; attempt, fence, deadline and reply topic vary between its attempts."""
    return request_hash({"tool_name": request.tool_name, "tool_version": request.tool_version,
                         "canonical_arguments": request.canonical_arguments})


async def open_wallet(pool: asyncpg.Pool, wallet_id: str, currency: str, balance_minor: int) -> bool:
    """Seed a wallet (demo and tests); False when it already exists."""
    async with pool.acquire() as conn:
        return await repo.insert_wallet(conn, wallet_id, tenant_of(wallet_id), currency.upper(),
                                        balance_minor)


async def lookup(pool: asyncpg.Pool, operation_key: str) -> EffectReceipt | None:
    """Reconciliation's ``lookup_by_key``: the recorded answer, or None if never settled."""
    async with pool.acquire() as conn:
        response = await recorded_response(conn, repo.SCHEMA, operation_key)
    return EffectReceipt.model_validate(response | {"replayed": True}) if response else None
