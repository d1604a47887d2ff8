"""The wallet on the Kafka effect adapter: each request or lookup is answered with one
``EffectReceiptIssued`` on its ``reply_topic``, written to the outbox in the transaction that
settles it (the consumer template's), so the receipt exists if and only if the answer does.
A consumed batch is answered at once: its rows are locked, read and written through a
``BatchBook`` in a constant number of statements, its requests decided in delivery order.

Fault points (docs/design.md §6, enabled through ``shared.faults``), besides those of
``answers.py``: ``wallet.fail`` (``drop``) fails the batch with a transient error, so it rolls
back and Kafka redelivers it; ``wallet.after_commit_drop_response`` (``drop``) commits an effect
request's answer but emits no receipt: the caller's "response lost" (docs/design.md §1). A later
request or lookup under the same key gets the recorded answer, ``replayed=True``.
"""

from __future__ import annotations

import logging

from downstreams.wallet.answers import Lookup, answer, answer_lookup
from downstreams.wallet.batch_book import BatchBook
from downstreams.wallet.routes import ROUTES
from shared import faults
from shared.contracts.effect_requests import EFFECT_RECEIPT_ISSUED, EffectReceipt, EffectRequested
from shared.db.unit_of_work import UnitOfWork
from shared.downstream.capability_check import CapabilityCheck
from shared.errors import RetryableError
from shared.messaging.envelope import Envelope
from shared.messaging.routes import Router

log = logging.getLogger(__name__)
PRODUCER = "wallet"


class WalletInbox:
    """The consumer's set-wise handler; it keeps the capability check every request goes
    through and the routing table's readers."""

    def __init__(self, check: CapabilityCheck) -> None:
        self._check = check
        self._readers = Router(ROUTES)

    async def answer_all(self, uow: UnitOfWork, envelopes: list[Envelope]) -> None:
        """Answer a batch in delivery order; the consumer admitted every envelope's type."""
        for _ in envelopes:
            await _transient_failure()
        batch = [self._readers.target(envelope.event_type)(envelope) for envelope in envelopes]
        book = await BatchBook.load(
            uow.connection, [asked.fence for asked in batch],
            [a.question for a in batch if isinstance(a.question, EffectRequested)],
            [a.question.operation_key for a in batch if isinstance(a.question, Lookup)])
        for asked in batch:
            if isinstance(asked.question, Lookup):
                _reply(uow, asked.envelope, asked.reply_topic,
                       await answer_lookup(book, asked.question))
                continue
            receipt = await answer(book, asked.envelope.run_id, asked.question, self._check)
            if not await _receipt_dropped(receipt):
                _reply(uow, asked.envelope, asked.reply_topic, receipt)
        await book.flush(uow.connection)


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
