"""The wallet on the Kafka effect adapter: each request or lookup is answered with one
``EffectReceiptIssued`` on its ``reply_topic``, written to the outbox in the transaction that
settles it (the consumer template's), so the receipt exists if and only if the answer does.

Fault points (DESIGN.md §6, enabled through ``shared.faults``), besides those of
``answers.py``: ``wallet.fail`` (``drop``) fails the batch with a transient error, so it rolls
back and Kafka redelivers it; ``wallet.after_commit_drop_response`` (``drop``) commits an effect
request's answer but emits no receipt: the caller's "response lost" (DESIGN.md §1). A later
request or lookup under the same key gets the recorded answer, ``replayed=True``.
"""

from __future__ import annotations

import logging
from typing import TypeVar

from pydantic import ValidationError

from services.wallet.answers import Lookup, answer, answer_lookup
from shared import faults
from shared.contracts.effect_requests import (EFFECT_LOOKUP_REQUESTED, EFFECT_RECEIPT_ISSUED,
                                              EFFECT_REQUESTED, EffectLookupRequested,
                                              EffectReceipt, EffectRequested)
from shared.db.unit_of_work import UnitOfWork
from shared.errors import PermanentError, RetryableError
from shared.messaging.envelope import Envelope

log = logging.getLogger(__name__)
PRODUCER = "wallet"
Asked = TypeVar("Asked", EffectRequested, EffectLookupRequested)


async def handle_effect_request(uow: UnitOfWork, envelope: Envelope) -> None:
    try:
        await faults.hit("wallet.fail")
    except faults.ResponseDropped:
        raise RetryableError("injected transient wallet failure") from None
    asked: EffectRequested | EffectLookupRequested
    if envelope.event_type == EFFECT_REQUESTED:
        asked = _payload(EffectRequested, envelope)
        receipt = await answer(uow.connection, envelope.run_id, asked)
        if await _receipt_dropped(receipt):
            return
    elif envelope.event_type == EFFECT_LOOKUP_REQUESTED:
        asked = _payload(EffectLookupRequested, envelope)
        receipt = await answer_lookup(uow.connection, Lookup(run_id=envelope.run_id, **asked.model_dump(
            include={"operation_key", "fence", "attempt", "logical_call_id"})))
    else:
        raise PermanentError(f"the wallet answers {EFFECT_REQUESTED} and "
                             f"{EFFECT_LOOKUP_REQUESTED}, not {envelope.event_type}")
    uow.emit(asked.reply_topic, Envelope.new(
        event_type=EFFECT_RECEIPT_ISSUED, run_id=envelope.run_id, producer=PRODUCER,
        payload=receipt.model_dump(mode="json"), causation=envelope))


async def _receipt_dropped(receipt: EffectReceipt) -> bool:
    try:
        await faults.hit("wallet.after_commit_drop_response")
    except faults.ResponseDropped:
        log.warning("fault: %s answered %s, receipt dropped", receipt.operation_key, receipt.status)
        return True
    return False


def _payload(model: type[Asked], envelope: Envelope) -> Asked:
    try:
        return model.model_validate(envelope.payload)
    except ValidationError as error:
        raise PermanentError(f"not a valid {envelope.event_type}: {error}") from error
