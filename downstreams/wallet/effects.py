"""The wallet's effects: a debit or a refund applied under row locks, or the rule that refuses it.

Fault point (docs/design.md §6, through ``shared.faults``): ``wallet.echo_memo`` (``drop``) makes an
applied debit's result also carry the request's ``memo`` verbatim, as a careless downstream
echoes caller text: tool output with text in it that nobody validated, which must never be
promoted to the agent (docs/design.md §5.9; the result schema declares no ``memo``).
"""

from __future__ import annotations

from typing import Any

from downstreams.wallet.book import Book
from downstreams.wallet.contracts import DebitArguments, RefundArguments, WalletReason
from downstreams.wallet.domain import debit_refusal, refund_refusal
from shared import faults
from shared.contracts.effect_requests import EffectRequested
from shared.ids import new_event_id

ARGUMENTS: dict[str, type[DebitArguments]] = {"wallet.debit": DebitArguments,
                                              "wallet.refund": RefundArguments}
"""The tools the wallet performs, with the model of their canonical arguments."""

Applied = tuple[dict[str, Any] | None, WalletReason | None]
"""(result, None) when applied, (None, reason) when the wallet's rules refuse."""


async def apply(book: Book, request: EffectRequested,
                arguments: DebitArguments) -> Applied:
    if isinstance(arguments, RefundArguments):
        return await _refund(book, request, arguments)
    return await _debit(book, request, arguments)


async def _debit(book: Book, request: EffectRequested, args: DebitArguments) -> Applied:
    wallet = await book.wallet(args.wallet_id)
    if reason := debit_refusal(wallet, args.amount, args.currency):
        return None, reason
    debit_id = str(new_event_id())
    await book.add_debit(debit_id, wallet, args.amount, request)
    balance = await book.change_balance(wallet, -args.amount)
    result: dict[str, Any] = {"debit_id": debit_id, "balance_minor": balance}
    try:
        await faults.hit("wallet.echo_memo")
    except faults.ResponseDropped:
        result["memo"] = request.canonical_arguments.get("memo")
    return result, None


async def _refund(book: Book, request: EffectRequested, args: RefundArguments) -> Applied:
    wallet = await book.wallet(args.wallet_id)
    debit = await book.debit(args.debit_id) if wallet else None
    if reason := refund_refusal(wallet, debit, args.amount, args.currency):
        return None, reason
    refund_id = str(new_event_id())
    await book.add_refund(refund_id, debit, args.amount, request)
    balance = await book.change_balance(wallet, args.amount)
    return {"refund_id": refund_id, "balance_minor": balance}, None
