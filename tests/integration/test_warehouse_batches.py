"""The warehouse answers a consumed batch at once (``WarehouseInbox.answer_all``): each request
sees what the ones before it in the batch did (stock held, a reservation released, a key
settled or released, a fence raised), and the batch costs as many statements for one
request as for twenty."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta

import pytest

from downstreams.warehouse.handlers import WarehouseInbox, stock_sku
from downstreams.warehouse.repository import SCHEMA
from shared.config import Settings
from shared.contracts.effect_requests import (EFFECT_LOOKUP_REQUESTED, EFFECT_REQUESTED,
                                              EffectLookupRequested, EffectRequested)
from shared.db.schemas import migrate_service
from shared.db.unit_of_work import UnitOfWork
from shared.downstream.capability_check import CapabilityCheck
from shared.identity import capability_keys
from shared.messaging.envelope import Envelope
from tests.support.capabilities import capability_for
from tests.support.statements import counted

pytestmark = pytest.mark.infra


@pytest.fixture
async def inbox(pool) -> WarehouseInbox:
    await migrate_service(pool, SCHEMA)
    return WarehouseInbox(CapabilityCheck(capability_keys.public_keys(Settings())))


def _request(key: str, arguments: dict, *, tool: str = "inventory.reserve", fence: int = 1,
             run_id: str | None = None, late: bool = False) -> Envelope:
    call_id = uuid.uuid5(uuid.NAMESPACE_URL, key)
    payload = EffectRequested(
        operation_key=key, tool_name=tool, tool_version="1", canonical_arguments=arguments,
        attempt=1, fence=fence, tenant_id="acme", logical_call_id=call_id,
        deadline_at=datetime.now(UTC) + timedelta(minutes=-1 if late else 5),
        reply_topic="receipts", capability=capability_for(key, tool, arguments, call_id))
    return Envelope.new(event_type=EFFECT_REQUESTED, run_id=run_id or f"run-{key}",
                        producer="dispatcher", payload=payload.model_dump(mode="json"))


def _lookup(key: str) -> Envelope:
    payload = EffectLookupRequested(
        operation_key=key, tool_name="inventory.reserve", attempt=2, fence=1, tenant_id="acme",
        logical_call_id=uuid.uuid5(uuid.NAMESPACE_URL, key), reply_topic="receipts")
    return Envelope.new(event_type=EFFECT_LOOKUP_REQUESTED, run_id=f"run-{key}",
                        producer="dispatcher", payload=payload.model_dump(mode="json"))


def _reserve(sku: str, quantity: int) -> dict:
    return {"sku": sku, "order_id": f"tenant/acme/o-{uuid.uuid4().hex[:10]}", "quantity": quantity}


async def _receipts(pool, keys: list[str]) -> list[tuple]:
    rows = await pool.fetch(
        f"SELECT envelope->'payload' AS p FROM {SCHEMA}.outbox"
        " WHERE envelope->'payload'->>'operation_key' = ANY($1::text[]) ORDER BY position", keys)
    return [(p["operation_key"].rsplit(":", 1)[1], p["status"], p.get("reason"), p.get("replayed"))
            for p in (json.loads(row["p"]) for row in rows)]


async def test_each_request_of_a_batch_sees_what_the_ones_before_it_did(pool, inbox):
    tag, sku = uuid.uuid4().hex[:8], f"SKU-{uuid.uuid4().hex[:10]}"
    assert await stock_sku(pool, sku, 5)
    k = {name: f"{tag}:{name}" for name in
         ("k0", "k1", "k2", "k3", "k4", "k5", "k6", "k7", "k8", "k9")}
    async with UnitOfWork(pool, SCHEMA) as uow:
        await inbox.answer_all(uow, [_request(k["k0"], _reserve(sku, 2))])
        await uow.commit()
    reserved = await pool.fetchval(f"SELECT reservation_id FROM {SCHEMA}.reservations "
                                   "WHERE operation_key = $1", k["k0"])
    release = {"reservation_id": reserved}
    run = f"run-{tag}"
    batch = [_request(k["k1"], _reserve(sku, 2)),
             _request(k["k1"], _reserve(sku, 2)),  # another order: the key is reused
             _request(k["k2"], _reserve(sku, 2)),  # one unit left
             _request(k["k3"], release, tool="inventory.release"),
             _request(k["k4"], release, tool="inventory.release"),  # released already
             _request(k["k5"], _reserve(sku, 3), late=True),  # refused, the key stays free
             _request(k["k5"], _reserve(sku, 3)),
             _lookup(k["k1"]), _lookup(k["k9"]),
             _request(k["k6"], {"order_id": f"tenant/acme/o-{tag}", "address": "1 Road"},
                      tool="shipment.schedule", run_id=run, fence=3),
             _request(k["k7"], _reserve(sku, 1), run_id=run, fence=2)]  # stale
    async with UnitOfWork(pool, SCHEMA) as uow:
        await inbox.answer_all(uow, batch)
        await uow.commit()

    assert await _receipts(pool, list(k.values())[1:]) == [
        ("k1", "applied", None, False), ("k1", "rejected", "operation_key_reused", False),
        ("k2", "rejected", "insufficient_stock", False), ("k3", "applied", None, False),
        ("k4", "rejected", "already_released", False), ("k5", "rejected", "deadline_passed", False),
        ("k5", "applied", None, False), ("k1", "applied", None, True), ("k9", "not_found", None, False),
        ("k6", "applied", None, False), ("k7", "stale", "stale_fence", False)]
    assert await pool.fetchval(f"SELECT available FROM {SCHEMA}.stock WHERE sku = $1", sku) == 0
    settled = await pool.fetch(f"SELECT operation_key FROM {SCHEMA}.idempotency_keys "
                               "WHERE operation_key LIKE $1 ORDER BY 1", f"{tag}:%")
    assert [row["operation_key"].rsplit(":", 1)[1] for row in settled] == [
        "k0", "k1", "k2", "k3", "k4", "k5", "k6"]


async def test_a_batch_takes_as_many_statements_for_one_request_as_for_twenty(pool, inbox):
    async def statements(count: int) -> int:
        sku = f"SKU-{uuid.uuid4().hex[:10]}"
        assert await stock_sku(pool, sku, 100)
        async with UnitOfWork(pool, SCHEMA) as uow:
            with counted(uow.connection) as queries:
                await inbox.answer_all(uow, [_request(f"op-{uuid.uuid4().hex}", _reserve(sku, 1))
                                             for _ in range(count)])
                await uow.commit()
        return len(queries)

    assert await statements(1) == await statements(20)
