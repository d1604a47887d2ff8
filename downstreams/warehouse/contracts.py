"""What the warehouse accepts and answers, on top of the generic Kafka effect adapter
(``shared/contracts/effect_requests.py``).

Arguments arrive canonical: the intake applied the registry's rules, so resource ids are
``tenant/<tenant>/<id>``, timestamps carry a zone, tag lists are sorted sets. These models only
check that shape; they never re-canonicalize, because the operation key and the request hash
were computed from exactly these values. Unknown fields are refused rather than ignored: a
downstream must not apply a request it only partly understands.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field


TenantResource = Annotated[str, Field(max_length=300,
                                      pattern=r"^tenant/[A-Za-z0-9][A-Za-z0-9._-]{0,63}/\S+$")]


class WarehouseReason(StrEnum):
    """Why a request was answered ``rejected`` or ``stale``; stable, callers branch on them."""

    INSUFFICIENT_STOCK = "insufficient_stock"
    UNKNOWN_SKU = "unknown_sku"
    RESERVATION_NOT_FOUND = "reservation_not_found"
    ALREADY_RELEASED = "already_released"
    CARRIER_REFUSED = "carrier_refused"
    OPERATION_KEY_REUSED = "operation_key_reused"
    STALE_FENCE = "stale_fence"
    DEADLINE_PASSED = "deadline_passed"
    UNSUPPORTED_TOOL = "unsupported_tool"
    INVALID_ARGUMENTS = "invalid_arguments"


class _Arguments(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ReserveArguments(_Arguments):
    """``inventory.reserve`` v1 → result ``{reservation_id, expires_at?}``."""

    sku: str = Field(min_length=1, max_length=64)
    order_id: TenantResource
    quantity: int = Field(ge=1, le=10_000)
    tags: tuple[str, ...] = Field(default=(), max_length=20)
    hold_until: AwareDatetime | None = None


class ReleaseArguments(_Arguments):
    """``inventory.release`` v1 → result ``{released: true, reservation_id}``."""

    reservation_id: TenantResource


class ShipmentArguments(_Arguments):
    """``shipment.schedule`` v1 → result ``{shipment_id}``."""

    order_id: TenantResource
    address: str = Field(min_length=1, max_length=500)
