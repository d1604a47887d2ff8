"""The warehouse's rules, without I/O: may this reservation or release be applied?"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime

from downstreams.warehouse.contracts import WarehouseReason
from shared.tools.tenancy import tenant_resource


@dataclass(frozen=True)
class Stock:
    sku: str
    available: int
    version: int


@dataclass(frozen=True)
class Reservation:
    reservation_id: str
    sku: str
    quantity: int
    released: bool


def resource_id(tenant: str, kind: str, minted: uuid.UUID) -> str:
    """Ids the warehouse mints live in the tenant of the order they serve, so a compensation
    that copies one into its arguments passes the intake's tenant_resource rule unchanged."""
    return tenant_resource(tenant, f"{kind}-{minted.hex}")


def utc_stamp(moment: datetime) -> str:
    """The registry's canonical timestamp spelling: UTC, microseconds, ``Z``."""
    return moment.astimezone(UTC).replace(tzinfo=None).isoformat(timespec="microseconds") + "Z"


def reserve_refusal(stock: Stock | None, quantity: int) -> WarehouseReason | None:
    if stock is None:
        return WarehouseReason.UNKNOWN_SKU
    if quantity > stock.available:
        return WarehouseReason.INSUFFICIENT_STOCK
    return None


def release_refusal(reservation: Reservation | None) -> WarehouseReason | None:
    """A reservation gives its quantity back once; a second release, under any key, is refused."""
    if reservation is None:
        return WarehouseReason.RESERVATION_NOT_FOUND
    if reservation.released:
        return WarehouseReason.ALREADY_RELEASED
    return None
