"""The wallet on the Kafka effect adapter: each request or lookup is answered with one
``EffectReceiptIssued`` on its ``reply_topic``, written to the outbox in the transaction that
settles it (the consumer template's), so the receipt exists if and only if the answer does.

Fault points (docs/design.md §6, enabled through ``shared.faults``), besides those of
``answers.py``: ``wallet.fail`` (``drop``) fails the batch with a transient error, so it rolls
back and Kafka redelivers it; ``wallet.after_commit_drop_response`` (``drop``) commits an effect
request's answer but emits no receipt: the caller's "response lost" (docs/design.md §1). A later
request or lookup under the same key gets the recorded answer, ``replayed=True``.
"""

from __future__ import annotations

import logging

from downstreams.wallet.answers import Lookup, answer, answer_lookup
from shared import faults
from shared.contracts.effect_requests import (EFFECT_RECEIPT_ISSUED, EffectLookupRequested,
                                              EffectReceipt, EffectRequested)
from shared.db.unit_of_work import UnitOfWork
from shared.downstream.capability_check import CapabilityCheck
from shared.errors import RetryableError
from shared.messaging.envelope import Envelope, parse

log = logging.getLogger(__name__)
PRODUCER = "wallet"


class WalletInbox:
    """The routes' holder: it keeps the capability check every request goes through."""

    def __init__(self, check: CapabilityCheck) -> None:
        self._check = check

    async def effect_requested(self, uow: UnitOfWork, envelope: Envelope) -> None:
        await _transient_failure()
        asked = parse(envelope, EffectRequested)
        receipt = await answer(uow.connection, envelope.run_id, asked, self._check)
        if not await _receipt_dropped(receipt):
            _reply(uow, envelope, asked.reply_topic, receipt)

    async def lookup_requested(self, uow: UnitOfWork, envelope: Envelope) -> None:
        await _transient_failure()
        asked = parse(envelope, EffectLookupRequested)
        receipt = await answer_lookup(uow.connection, Lookup(
            run_id=envelope.run_id,
            **asked.model_dump(include={"operation_key", "fence", "attempt", "logical_call_id",
                                        "tenant_id"})))
        _reply(uow, envelope, asked.reply_topic, receipt)


def _reply(uow: UnitOfWork, envelope: Envelope, topic: str, receipt: EffectReceipt) -> None:
    uow.emit(topic, Envelope.new(
        event_type=EFFECT_RECEIPT_ISSUED, run_id=envelope.run_id, producer=PRODUCER,
        payload=receipt.model_dump(mode="json"), causation=envelope))


async def _transient_failure() -> None:
    try:
        await faults.hit("wallet.fail")
    except faults.ResponseDropped:
        raise RetryableError("injected transient wallet failure") from None


async def _receipt_dropped(receipt: EffectReceipt) -> bool:
    try:
        await faults.hit("wallet.after_commit_drop_response")
    except faults.ResponseDropped:
        log.warning("fault: %s answered %s, receipt dropped", receipt.operation_key, receipt.status)
        return True
    return False
