"""The wallet's answer to an effect request or a lookup, inside the caller's transaction.

Both ways in, Kafka (``handlers.py``) and HTTP (``http_api.py``), answer through these two
functions, so they cannot drift. For a request the order of the checks is the contract:

1. **fence** — below the highest fence seen for the run: ``stale``, and nothing else is read
   or written. Admitting locks the run's fence row until commit, so a run's requests and
   lookups take turns: a lookup sees the answer of every request admitted before it, and once
   a new owner has looked up, an older owner's request cannot land.
2. **key** — settled before: the recorded answer (``replayed``), whatever else is wrong with
   this request: refusing it would deny an effect that exists. Settled for other arguments:
   ``rejected`` ``operation_key_reused``.
3. **the request itself** — a capability that does not authorize it
   (``shared.downstream.capability_check``: missing, forged, signed by a key rotated out,
   for another key, tool, tenant or arguments, or expired), a tool it does not serve,
   arguments that do not fit, a passed deadline, or a
   refusal injected at ``wallet.refuse`` (``drop``; ``wallet.refuse_refund`` refuses refunds
   only, the compensation that cannot succeed): ``rejected``, the key is released
   unsettled, so a lookup answers ``not_found`` and a later request under the key is new.
4. **the effect** — applied, or refused by the wallet's rules; either answer is recorded
   against the key and replayed to every later request under it.

``wallet.delay`` (``delay:S``) sleeps before a request's fence check: a slow wallet, e.g. one
that answers after the caller's deadline. ``wallet.lookup_delay`` does the same to a lookup: a
slow reconciliation, during which the caller's outcome stays unresolved.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from downstreams.wallet.contracts import DebitArguments, WalletReason
from downstreams.wallet.book import Book
from downstreams.wallet.effects import ARGUMENTS, apply
from shared import faults
from shared.contracts.effect_requests import EffectReceipt, EffectRequested, ReceiptStatus
from shared.contracts.tenants import TenantId
from shared.downstream.capability_check import CapabilityCheck, CapabilityReason
from shared.downstream.idempotent_write import request_hash
from shared.ids import new_event_id
from shared.runs import RunKey


class Lookup(BaseModel):
    """A status lookup by key, however it arrived (``EffectLookupRequested``, ``GET``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    run_id: str = Field(min_length=1, max_length=200, description="The fence's scope, with tenant_id.")
    tenant_id: TenantId
    operation_key: str = Field(min_length=1, max_length=200)
    fence: int = Field(ge=0)
    attempt: int = Field(ge=1)
    logical_call_id: uuid.UUID


async def answer(book: Book, run_id: str, request: EffectRequested,
                 check: CapabilityCheck) -> EffectReceipt:
    """Settle the key at most once; every later request under it gets the recorded answer."""
    await faults.hit("wallet.delay")
    if not await book.admit(RunKey(request.tenant_id, run_id), request.fence):
        return _receipt(request, "stale", reason=WalletReason.STALE_FENCE)
    claim = await book.claim(request.operation_key, intent_hash(request))
    if claim.status == "replay":
        return _replayed(request, claim.response)
    if claim.status == "reused":
        return _rejected(request, WalletReason.OPERATION_KEY_REUSED)
    refused = check.refusal(request)
    arguments = refused or await _admissible(request)
    if isinstance(arguments, StrEnum):
        await book.release(request.operation_key)
        return _rejected(request, arguments)
    result, reason = await apply(book, request, arguments)
    receipt = _rejected(request, reason) if reason else _receipt(
        request, "applied", result=result, receipt_id=new_event_id())
    await book.record(request.operation_key, receipt.model_dump(mode="json"))
    return receipt


async def answer_lookup(book: Book, lookup: Lookup) -> EffectReceipt:
    """The recorded answer (``replayed``), ``not_found`` if never settled, or ``stale``."""
    await faults.hit("wallet.lookup_delay")
    if not await book.admit(RunKey(lookup.tenant_id, lookup.run_id), lookup.fence):
        return _receipt(lookup, "stale", reason=WalletReason.STALE_FENCE)
    response = await book.recorded(lookup.operation_key)
    return _replayed(lookup, response) if response else _receipt(lookup, "not_found")


async def _admissible(request: EffectRequested) -> DebitArguments | WalletReason:
    """The request's arguments, or why this request (not the intent) is refused."""
    model = ARGUMENTS.get(request.tool_name)
    if model is None:
        return WalletReason.UNSUPPORTED_TOOL
    if request.deadline_at <= datetime.now(UTC):
        return WalletReason.DEADLINE_PASSED
    try:
        arguments = model.model_validate(request.canonical_arguments)
    except ValidationError:
        return WalletReason.INVALID_ARGUMENTS
    try:
        await faults.hit("wallet.refuse")
        if request.tool_name == "wallet.refund":
            await faults.hit("wallet.refuse_refund")
    except faults.ResponseDropped:
        return WalletReason.REFUSED
    return arguments


def intent_hash(request: EffectRequested) -> str:
    """What the intent is; attempt, fence, deadline and reply topic vary between its attempts."""
    return request_hash({"tool_name": request.tool_name, "tool_version": request.tool_version,
                         "canonical_arguments": request.canonical_arguments})


def _receipt(asked: EffectRequested | Lookup, status: ReceiptStatus, **fields: Any) -> EffectReceipt:
    return EffectReceipt(operation_key=asked.operation_key, logical_call_id=asked.logical_call_id,
                         attempt=asked.attempt, status=status, **fields)


def _rejected(asked: EffectRequested, reason: WalletReason | CapabilityReason) -> EffectReceipt:
    return _receipt(asked, "rejected", reason=reason, receipt_id=new_event_id())


def _replayed(asked: EffectRequested | Lookup, recorded: dict[str, Any]) -> EffectReceipt:
    """The recorded answer, addressed to the attempt that asked now."""
    return _receipt(asked, recorded["status"], replayed=True, result=recorded.get("result"),
                    reason=recorded.get("reason"), receipt_id=recorded.get("receipt_id"),
                    settled_by_attempt=recorded.get("settled_by_attempt") or recorded.get("attempt"))
