"""What each warehouse tool does once its key is claimed: the domain write, or a refusal.

Each operation runs against the batch's ``BatchBook``, in the transaction that claims the
operation key and records the answer, so the write and the key row commit together or not at
all. An operation returns
``(result, None)`` when applied or ``(None, reason)`` when refused; a refusal is settled like
an answer, so a replay under the same key is refused the same way.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from downstreams.warehouse.batch_book import BatchBook
from downstreams.warehouse.contracts import (ReleaseArguments, ReserveArguments, ShipmentArguments,
                                             WarehouseReason)
from downstreams.warehouse.domain import release_refusal, reserve_refusal, resource_id, utc_stamp
from shared import faults
from shared.contracts.effect_requests import EffectRequested
from shared.ids import new_event_id
from shared.tools.tenancy import tenant_of

Outcome = tuple[dict[str, Any] | None, WarehouseReason | None]


async def reserve(book: BatchBook, args: ReserveArguments,
                  request: EffectRequested) -> Outcome:
    stock = book.stock(args.sku)
    if reason := reserve_refusal(stock, args.quantity):
        return None, reason
    tenant = tenant_of(args.order_id)
    reservation_id = resource_id(tenant, "res", new_event_id())
    book.add_reservation(reservation_id, tenant, args, request)
    book.change_available(stock, -args.quantity)
    result: dict[str, Any] = {"reservation_id": reservation_id}
    if args.hold_until is not None:
        result["expires_at"] = utc_stamp(args.hold_until)
    return result, None


async def release(book: BatchBook, args: ReleaseArguments,
                  request: EffectRequested) -> Outcome:
    reservation = book.reservation(args.reservation_id)
    if reason := release_refusal(reservation):
        return None, reason
    book.add_release(reservation, request)
    book.change_available(book.stock(reservation.sku), reservation.quantity)
    return {"released": True, "reservation_id": reservation.reservation_id}, None


async def schedule_shipment(book: BatchBook, args: ShipmentArguments,
                            request: EffectRequested) -> Outcome:
    try:
        await faults.hit("warehouse.refuse_shipment")
    except faults.ResponseDropped:
        return None, WarehouseReason.CARRIER_REFUSED
    tenant = tenant_of(args.order_id)
    shipment_id = resource_id(tenant, "shp", new_event_id())
    book.add_shipment(shipment_id, tenant, args, request)
    return {"shipment_id": shipment_id}, None


@dataclass(frozen=True)
class Operation:
    arguments: type[BaseModel]
    apply: Callable[[BatchBook, Any, EffectRequested], Awaitable[Outcome]]


OPERATIONS: dict[tuple[str, str], Operation] = {
    ("inventory.reserve", "1"): Operation(ReserveArguments, reserve),
    ("inventory.release", "1"): Operation(ReleaseArguments, release),
    ("shipment.schedule", "1"): Operation(ShipmentArguments, schedule_shipment),
}
"""Keyed by (tool name, version): another version may mean something else, so it is refused."""
