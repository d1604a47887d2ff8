"""The reference warehouse on real Kafka and PostgreSQL: effect and lookup requests are produced
to its topic as the dispatcher's relay would, receipts are read back from a per-test reply topic,
and the business rows (stock, reservations, releases, shipments) are checked directly."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta

import pytest

from shared.db.schemas import migrate_service
from downstreams.warehouse.handlers import lookup, stock_sku
from downstreams.warehouse.main import run_warehouse
from downstreams.warehouse.repository import SCHEMA
from downstreams.warehouse.settings import WarehouseSettings
from shared import faults
from shared.config import Endpoints
from shared.contracts.effect_requests import (EFFECT_LOOKUP_REQUESTED, EFFECT_RECEIPT_ISSUED,
                                              EFFECT_REQUESTED, EffectLookupRequested,
                                              EffectRequested)
from shared.messaging.envelope import Envelope
from shared.operator.publish import publish as send
from tests.support.capabilities import capability_for
from tests.support.kafka import create_topic, read_topic, unique_topic, wait_for
from tests.support.services import ServiceRun, running_service

pytestmark = pytest.mark.infra


class WarehouseRun(ServiceRun):
    def __init__(self, request_topic: str, reply_topic: str) -> None:
        self.request_topic = request_topic
        self.reply_topic = reply_topic


@pytest.fixture(autouse=True)
async def warehouse_schema(pool) -> None:
    await migrate_service(pool, SCHEMA)


@pytest.fixture(autouse=True)
def no_faults():
    yield
    faults.configure("")


@asynccontextmanager
async def running_warehouse(endpoints: Endpoints) -> AsyncIterator[WarehouseRun]:
    run = WarehouseRun(unique_topic("effects.warehouse"), unique_topic("effects.receipts"))
    for topic in (run.request_topic, run.reply_topic):
        await create_topic(endpoints.kafka_bootstrap, topic)
    topics = WarehouseSettings(request_topic=run.request_topic, reply_topic=run.reply_topic)
    async with running_service(endpoints, SCHEMA, lambda settings, stopping: run_warehouse(
            settings, topics, stopping), run):
        yield run


def request(run: WarehouseRun, key: str, arguments: dict, *, tool: str = "inventory.reserve",
            attempt: int = 1, fence: int = 1, run_id: str | None = None,
            deadline_in: timedelta = timedelta(minutes=5), signed: bool = True) -> Envelope:
    """Carrying the policy's capability for exactly this request unless not ``signed``."""
    call_id = uuid.uuid5(uuid.NAMESPACE_URL, key)
    payload = EffectRequested(
        operation_key=key, tool_name=tool, tool_version="1", canonical_arguments=arguments,
        attempt=attempt, fence=fence, tenant_id="acme", logical_call_id=call_id,
        deadline_at=datetime.now(UTC) + deadline_in, reply_topic=run.reply_topic,
        capability=capability_for(key, tool, arguments, call_id) if signed else None)
    return Envelope.new(event_type=EFFECT_REQUESTED, run_id=run_id or f"run-{key}",
                        producer="dispatcher", payload=payload.model_dump(mode="json"))


def lookup_request(run: WarehouseRun, key: str, *, attempt: int = 2, fence: int = 1,
                   run_id: str | None = None) -> Envelope:
    payload = EffectLookupRequested(
        operation_key=key, tool_name="inventory.reserve", attempt=attempt, fence=fence,
        tenant_id="acme", logical_call_id=uuid.uuid5(uuid.NAMESPACE_URL, key), reply_topic=run.reply_topic)
    return Envelope.new(event_type=EFFECT_LOOKUP_REQUESTED, run_id=run_id or f"run-{key}",
                        producer="dispatcher", payload=payload.model_dump(mode="json"))


async def receipts(bootstrap: str, run: WarehouseRun, count: int) -> list[dict]:
    records = await read_topic(bootstrap, run.reply_topic, until=count, timeout=60)
    envelopes = [json.loads(record.value) for record in records]
    assert all(e["event_type"] == EFFECT_RECEIPT_ISSUED for e in envelopes)
    return [e["payload"] for e in envelopes]


def new_key() -> str:
    return f"op-{uuid.uuid4().hex[:12]}"


def new_order() -> str:
    return f"tenant/acme/o-{uuid.uuid4().hex[:10]}"


async def new_sku(pool, available: int = 10) -> str:
    sku = f"SKU-{uuid.uuid4().hex[:10]}"
    assert await stock_sku(pool, sku, available)
    return sku


def reserve(sku: str, quantity: int = 3, order_id: str | None = None) -> dict:
    return {"sku": sku, "order_id": order_id or new_order(), "quantity": quantity}


async def available(pool, sku: str) -> int:
    return await pool.fetchval(f"SELECT available FROM {SCHEMA}.stock WHERE sku = $1", sku)


async def reservations(pool, sku: str) -> int:
    return await pool.fetchval(f"SELECT count(*) FROM {SCHEMA}.reservations WHERE sku = $1", sku)


async def releases(pool, sku: str) -> int:
    return await pool.fetchval(
        f"SELECT count(*) FROM {SCHEMA}.releases l JOIN {SCHEMA}.reservations r"
        " USING (reservation_id) WHERE r.sku = $1", sku)


async def shipments(pool, order_id: str) -> int:
    return await pool.fetchval(f"SELECT count(*) FROM {SCHEMA}.shipments WHERE order_id = $1",
                               order_id)


async def receipts_written(pool, key: str) -> int:
    return await pool.fetchval(f"SELECT count(*) FROM {SCHEMA}.outbox "
                               "WHERE envelope->'payload'->>'operation_key' = $1", key)


async def test_a_reservation_is_applied_once_and_answered_with_a_receipt(pool, endpoints):
    sku, key = await new_sku(pool), new_key()
    hold = {"hold_until": "2026-03-14T10:00:00.000000Z", "tags": ["gift"]}
    async with running_warehouse(endpoints) as run:
        await send(endpoints.kafka_bootstrap, run.request_topic,
                   request(run, key, reserve(sku) | hold))
        [receipt] = await receipts(endpoints.kafka_bootstrap, run, 1)
    assert receipt["status"] == "applied" and receipt["replayed"] is False
    assert receipt["operation_key"] == key and receipt["attempt"] == 1
    assert receipt["result"]["reservation_id"].startswith("tenant/acme/res-")
    assert receipt["result"]["expires_at"] == hold["hold_until"]
    assert await available(pool, sku) == 7 and await reservations(pool, sku) == 1
    found = await lookup(pool, key)
    assert found.replayed is True and str(found.receipt_id) == receipt["receipt_id"]
    assert found.result == receipt["result"]
    assert await lookup(pool, new_key()) is None


async def test_a_redelivered_batch_reserves_once_and_answers_once(pool, endpoints):
    sku, key = await new_sku(pool), new_key()
    faults.configure("warehouse.after_commit=drop@1")
    async with running_warehouse(endpoints) as run:
        await send(endpoints.kafka_bootstrap, run.request_topic,
                   request(run, key, reserve(sku), run_id=key))
        await receipts(endpoints.kafka_bootstrap, run, 1)
        # Same partition, sent later: once it is answered, the redelivery came before it.
        await send(endpoints.kafka_bootstrap, run.request_topic,
                   request(run, new_key(), reserve(sku, 1), run_id=key))
        await receipts(endpoints.kafka_bootstrap, run, 2)
    assert run.totals.duplicates >= 1  # the batch really was delivered again
    assert await reservations(pool, sku) == 2 and await available(pool, sku) == 6
    assert await receipts_written(pool, key) == 1


async def test_a_resent_request_under_the_same_key_replays_the_recorded_receipt(pool, endpoints):
    sku, key = await new_sku(pool), new_key()
    arguments = reserve(sku)
    async with running_warehouse(endpoints) as run:
        first = request(run, key, arguments)
        again = request(run, key, arguments, attempt=2)
        await send(endpoints.kafka_bootstrap, run.request_topic, first, first, again)
        answers = await receipts(endpoints.kafka_bootstrap, run, 2)
    assert [a["replayed"] for a in answers] == [False, True]
    assert [a["attempt"] for a in answers] == [1, 2]
    assert answers[0]["result"] == answers[1]["result"]  # the same reservation_id
    assert answers[0]["receipt_id"] == answers[1]["receipt_id"]
    assert await reservations(pool, sku) == 1 and await available(pool, sku) == 7
    assert await receipts_written(pool, key) == 2  # the same envelope twice was answered once


async def test_the_same_key_with_another_quantity_is_refused_and_holds_nothing_more(pool, endpoints):
    sku, key = await new_sku(pool), new_key()
    arguments = reserve(sku)
    async with running_warehouse(endpoints) as run:
        await send(endpoints.kafka_bootstrap, run.request_topic, request(run, key, arguments),
                   request(run, key, arguments | {"quantity": 4}, attempt=2))
        first, second = await receipts(endpoints.kafka_bootstrap, run, 2)
    assert first["status"] == "applied"
    assert second["status"] == "rejected" and second["reason"] == "operation_key_reused"
    assert second["result"] is None
    assert await reservations(pool, sku) == 1 and await available(pool, sku) == 7


async def test_too_little_stock_or_an_unknown_sku_is_refused_and_nothing_is_held(pool, endpoints):
    sku, short, unknown = await new_sku(pool, available=2), new_key(), new_key()
    async with running_warehouse(endpoints) as run:
        await send(endpoints.kafka_bootstrap, run.request_topic,
                   request(run, short, reserve(sku, 3)),
                   request(run, unknown, reserve(f"SKU-missing-{uuid.uuid4().hex[:8]}")))
        by_key = {r["operation_key"]: r for r in await receipts(endpoints.kafka_bootstrap, run, 2)}
    assert by_key[short]["status"] == "rejected" and by_key[short]["reason"] == "insufficient_stock"
    assert by_key[unknown]["reason"] == "unknown_sku"
    assert await reservations(pool, sku) == 0 and await available(pool, sku) == 2
    assert (await lookup(pool, short)).status == "rejected"  # a business refusal is settled


async def test_a_release_gives_the_stock_back_once(pool, endpoints):
    sku, key = await new_sku(pool), new_key()
    one_run = f"run-{key}"  # one partition: the releases are applied in the order sent
    async with running_warehouse(endpoints) as run:
        await send(endpoints.kafka_bootstrap, run.request_topic,
                   request(run, key, reserve(sku), run_id=one_run))
        [reserved] = await receipts(endpoints.kafka_bootstrap, run, 1)
        release = {"reservation_id": reserved["result"]["reservation_id"]}
        await send(endpoints.kafka_bootstrap, run.request_topic, *(
            request(run, release_key, arguments, tool="inventory.release", attempt=attempt,
                    run_id=one_run)
            for release_key, arguments, attempt in (
                (f"{key}:release", release, 1),
                (f"{key}:release", release, 2),
                (f"{key}:release-again", release, 1),
                (f"{key}:release-unknown", {"reservation_id": "tenant/acme/res-nope"}, 1))))
        answers = (await receipts(endpoints.kafka_bootstrap, run, 5))[1:]
    released, replayed, again, unknown = answers
    assert released["status"] == "applied" and released["result"] == {
        "released": True, "reservation_id": release["reservation_id"]}
    assert replayed["replayed"] is True and replayed["result"] == released["result"]
    assert again["status"] == "rejected" and again["reason"] == "already_released"
    assert unknown["status"] == "rejected" and unknown["reason"] == "reservation_not_found"
    assert await releases(pool, sku) == 1 and await available(pool, sku) == 10


async def test_a_shipment_is_scheduled_once_per_key(pool, endpoints):
    order, key = new_order(), new_key()
    ship = {"order_id": order, "address": "1 Quay Street, Dublin"}
    async with running_warehouse(endpoints) as run:
        await send(endpoints.kafka_bootstrap, run.request_topic,
                   request(run, key, ship, tool="shipment.schedule"),
                   request(run, key, ship, tool="shipment.schedule", attempt=2))
        first, second = await receipts(endpoints.kafka_bootstrap, run, 2)
    assert first["status"] == "applied" and first["result"]["shipment_id"].startswith("tenant/acme/shp-")
    assert second["replayed"] is True and second["result"] == first["result"]
    assert await shipments(pool, order) == 1


async def test_a_refused_shipment_applies_nothing_and_stays_refused_under_its_key(pool, endpoints):
    order, key = new_order(), new_key()
    ship = {"order_id": order, "address": "1 Quay Street, Dublin"}
    faults.configure("warehouse.refuse_shipment=drop")
    async with running_warehouse(endpoints) as run:
        await send(endpoints.kafka_bootstrap, run.request_topic,
                   request(run, key, ship, tool="shipment.schedule"))
        [refused] = await receipts(endpoints.kafka_bootstrap, run, 1)
        faults.configure("")  # the carrier would accept now; the key's answer must not change
        await send(endpoints.kafka_bootstrap, run.request_topic,
                   request(run, key, ship, tool="shipment.schedule", attempt=2))
        _, replayed = await receipts(endpoints.kafka_bootstrap, run, 2)
    assert refused["status"] == "rejected" and refused["reason"] == "carrier_refused"
    assert refused["result"] is None and refused["replayed"] is False
    assert replayed["status"] == "rejected" and replayed["reason"] == "carrier_refused"
    assert replayed["replayed"] is True and replayed["receipt_id"] == refused["receipt_id"]
    assert await shipments(pool, order) == 0


async def test_the_saga_of_a_refused_shipment_leaves_the_stock_as_it_was(pool, endpoints):
    """reserve → ship (refused) → release, as the dispatcher's compensation will send them."""
    sku, order, key = await new_sku(pool), new_order(), new_key()
    one_run = f"run-{key}"
    faults.configure("warehouse.refuse_shipment=drop")
    async with running_warehouse(endpoints) as run:
        await send(endpoints.kafka_bootstrap, run.request_topic,
                   request(run, f"{key}:reserve", reserve(sku, 4, order), run_id=one_run),
                   request(run, f"{key}:ship", {"order_id": order, "address": "Dock 4"},
                           tool="shipment.schedule", run_id=one_run))
        reserved, shipped = await receipts(endpoints.kafka_bootstrap, run, 2)
        assert await available(pool, sku) == 6
        await send(endpoints.kafka_bootstrap, run.request_topic, request(
            run, f"{key}:release", {"reservation_id": reserved["result"]["reservation_id"]},
            tool="inventory.release", run_id=one_run))
        *_, released = await receipts(endpoints.kafka_bootstrap, run, 3)
    assert (reserved["status"], shipped["status"], released["status"]) == (
        "applied", "rejected", "applied")
    assert await shipments(pool, order) == 0
    assert await available(pool, sku) == 10 and await releases(pool, sku) == 1


async def test_a_stale_fence_is_refused_and_applies_nothing(pool, endpoints):
    sku, key = await new_sku(pool), new_key()
    one_run = f"run-{key}"
    async with running_warehouse(endpoints) as run:
        await send(endpoints.kafka_bootstrap, run.request_topic,
                   request(run, f"{key}:new-owner", reserve(sku, 1), fence=5, run_id=one_run),
                   request(run, f"{key}:old-owner", reserve(sku, 2), fence=4, run_id=one_run),
                   lookup_request(run, f"{key}:new-owner", fence=7, run_id=one_run),
                   request(run, f"{key}:paused", reserve(sku, 3), fence=6, run_id=one_run))
        applied, old_owner, looked_up, paused = await receipts(endpoints.kafka_bootstrap, run, 4)
    assert applied["status"] == "applied"
    assert old_owner["status"] == "stale" and old_owner["reason"] == "stale_fence"
    assert looked_up["status"] == "applied"
    assert paused["status"] == "stale"  # the lookup under fence 7 shut fence 6 out
    assert await reservations(pool, sku) == 1 and await available(pool, sku) == 9
    assert await lookup(pool, f"{key}:old-owner") is None  # refused without settling the key


async def test_a_lookup_answers_the_recorded_receipt_or_not_found(pool, endpoints):
    sku, key, never = await new_sku(pool), new_key(), new_key()
    one_run = f"run-{key}"  # one partition: the receipts come back in the order asked
    async with running_warehouse(endpoints) as run:
        await send(endpoints.kafka_bootstrap, run.request_topic,
                   request(run, key, reserve(sku), run_id=one_run))
        [receipt] = await receipts(endpoints.kafka_bootstrap, run, 1)
        await send(endpoints.kafka_bootstrap, run.request_topic,
                   lookup_request(run, key, attempt=3, run_id=one_run),
                   lookup_request(run, never, run_id=one_run))
        _, found, missing = await receipts(endpoints.kafka_bootstrap, run, 3)
    assert found["status"] == "applied" and found["replayed"] is True and found["attempt"] == 3
    assert found["receipt_id"] == receipt["receipt_id"] and found["result"] == receipt["result"]
    assert missing["status"] == "not_found" and missing["result"] is None
    assert await reservations(pool, sku) == 1 and await available(pool, sku) == 7


async def test_a_request_past_its_deadline_is_refused_and_leaves_the_key_free(pool, endpoints):
    sku, key = await new_sku(pool), new_key()
    arguments = reserve(sku)
    async with running_warehouse(endpoints) as run:
        await send(endpoints.kafka_bootstrap, run.request_topic,
                   request(run, key, arguments, deadline_in=timedelta(seconds=-1)))
        [late] = await receipts(endpoints.kafka_bootstrap, run, 1)
        assert await lookup(pool, key) is None
        await send(endpoints.kafka_bootstrap, run.request_topic,
                   request(run, key, arguments, attempt=2))
        _, on_time = await receipts(endpoints.kafka_bootstrap, run, 2)
    assert late["status"] == "rejected" and late["reason"] == "deadline_passed"
    assert on_time["status"] == "applied" and on_time["replayed"] is False
    assert await reservations(pool, sku) == 1 and await available(pool, sku) == 7


async def test_an_unsupported_tool_or_malformed_arguments_are_refused_without_settling(pool, endpoints):
    sku, unsupported, malformed = await new_sku(pool), new_key(), new_key()
    async with running_warehouse(endpoints) as run:
        await send(endpoints.kafka_bootstrap, run.request_topic,
                   request(run, unsupported, reserve(sku), tool="inventory.teleport"),
                   request(run, malformed, reserve(sku) | {"order_id": "no-tenant"}))
        by_key = {r["operation_key"]: r for r in await receipts(endpoints.kafka_bootstrap, run, 2)}
    assert by_key[unsupported]["reason"] == "unsupported_tool"
    assert by_key[malformed]["reason"] == "invalid_arguments"
    assert await lookup(pool, unsupported) is None and await lookup(pool, malformed) is None
    assert await reservations(pool, sku) == 0 and await available(pool, sku) == 10


async def test_a_lost_response_leaves_one_reservation_and_a_lookup_recovers_it(pool, endpoints):
    sku, key = await new_sku(pool), new_key()
    faults.configure("warehouse.after_commit_drop_response=drop@1")
    async with running_warehouse(endpoints) as run:
        await send(endpoints.kafka_bootstrap, run.request_topic, request(run, key, reserve(sku)))
        assert await wait_for(lambda: reservations(pool, sku), timeout=60) == 1
        assert await receipts_written(pool, key) == 0  # committed with the reservation, or never
        await send(endpoints.kafka_bootstrap, run.request_topic, lookup_request(run, key))
        [receipt] = await receipts(endpoints.kafka_bootstrap, run, 1)
    assert receipt["status"] == "applied" and receipt["replayed"] is True
    assert receipt["result"]["reservation_id"].startswith("tenant/acme/res-")
    assert await reservations(pool, sku) == 1 and await available(pool, sku) == 7
