"""The warehouse's pure rules, and its argument models against the example registry: what the
intake makes canonical, and what a compensation builds from a result, the warehouse accepts."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator
from pydantic import ValidationError

from downstreams.warehouse.contracts import (ReleaseArguments, ReserveArguments, ShipmentArguments,
                                             WarehouseReason)
from downstreams.warehouse.domain import (Reservation, Stock, release_refusal, reserve_refusal,
                                          resource_id, utc_stamp)
from shared.tools.tenancy import tenant_of
from downstreams.warehouse.operations import OPERATIONS
from shared.tools import canonicalize, load_registry

REGISTRY = load_registry(Path(__file__).resolve().parents[2] / "config" / "tools.example.yaml")
STOCK = Stock(sku="SKU-1", available=5, version=2)
RESERVATION = Reservation(reservation_id="tenant/acme/res-1", sku="SKU-1", quantity=2, released=False)


def test_a_reservation_may_take_the_last_unit():
    assert reserve_refusal(STOCK, 5) is None


@pytest.mark.parametrize(("stock", "quantity", "reason"), [
    (None, 1, WarehouseReason.UNKNOWN_SKU),
    (STOCK, 6, WarehouseReason.INSUFFICIENT_STOCK),
])
def test_a_reservation_is_refused_with_a_stable_reason(stock, quantity, reason):
    assert reserve_refusal(stock, quantity) is reason


def test_a_reservation_is_released_once_and_an_unknown_one_never():
    assert release_refusal(RESERVATION) is None
    released = Reservation(**{**RESERVATION.__dict__, "released": True})
    assert release_refusal(released) is WarehouseReason.ALREADY_RELEASED
    assert release_refusal(None) is WarehouseReason.RESERVATION_NOT_FOUND


def test_minted_ids_live_in_the_tenant_of_the_order_they_serve():
    minted = resource_id(tenant_of("tenant/acme/o-1"), "res", uuid.UUID(int=7))
    assert tenant_of(minted) == "acme" and minted.startswith("tenant/acme/res-")


def test_a_hold_is_answered_in_the_registry_canonical_utc_spelling():
    moment = datetime(2026, 3, 14, 12, 30, tzinfo=timezone(timedelta(hours=2)))
    assert utc_stamp(moment) == "2026-03-14T10:30:00.000000Z"


def test_only_the_tool_versions_the_warehouse_knows_are_served():
    assert set(OPERATIONS) == {("inventory.reserve", "1"), ("inventory.release", "1"),
                               ("shipment.schedule", "1")}


@pytest.mark.parametrize(("model", "arguments"), [
    (ReserveArguments, {"sku": "S", "order_id": "tenant/acme/o-1", "quantity": 1, "colour": "red"}),
    (ReserveArguments, {"sku": "S", "order_id": "o-1", "quantity": 1}),
    (ReserveArguments, {"sku": "S", "order_id": "tenant/acme/o-1", "quantity": 0}),
    (ReleaseArguments, {"reservation_id": "tenant/acme/has space"}),
    (ShipmentArguments, {"order_id": "tenant/acme/o-1", "address": ""}),
])
def test_arguments_the_warehouse_does_not_fully_understand_are_refused(model, arguments):
    with pytest.raises(ValidationError):
        model.model_validate(arguments)


@pytest.mark.parametrize(("tool", "arguments"), [
    ("inventory.reserve", {"sku": " SKU-1 ", "order_id": "o-1", "quantity": 2,
                           "tags": ["b", "a", "a"], "hold_until": "2026-03-14T12:00:00+02:00"}),
    ("inventory.release", {"reservation_id": "res-1"}),
    ("shipment.schedule", {"order_id": "o-1", "address": " 1 Quay St "}),
])
def test_what_the_intake_makes_canonical_the_warehouse_accepts(tool, arguments):
    canonical = canonicalize(REGISTRY.get(tool, "1"), "acme", arguments).value
    OPERATIONS[(tool, "1")].arguments.model_validate(canonical)


def test_a_release_built_from_a_reservation_result_is_already_canonical():
    """The dispatcher copies result.reservation_id into the release's canonical arguments; the
    intake would have produced the same value, so the release's key and hash line up."""
    reservation_id = resource_id("acme", "res", uuid.UUID(int=42))
    result = {"reservation_id": reservation_id, "expires_at": utc_stamp(datetime.now(UTC))}
    reserve = REGISTRY.get("inventory.reserve", "1")
    assert not list(Draft202012Validator(reserve.result_schema).iter_errors(result))
    built = {target: result[source.removeprefix("result.")]
             for target, source in reserve.compensation_arguments.items()}
    assert canonicalize(REGISTRY.get("inventory.release", "1"), "acme", built).value == built
    ReleaseArguments.model_validate(built)
