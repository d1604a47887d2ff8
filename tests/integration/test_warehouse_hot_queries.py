"""The warehouse's hot path on a ledger with history: the statements a consumed batch of requests
sends (its runs' fences and its keys claimed and read, the reservations its releases name
locked and whether each was released, the stock of its SKUs locked, the one write) read no
whole table and expect no share of one, so answering does not slow as reservations, releases,
shipments, keys and fences pile up (none is ever deleted). The fences and keys are the
downstream SDK's statements, also checked under the wallet's batch
(``test_wallet_hot_queries.py``); the rest are the warehouse's own. Checked on the plans
PostgreSQL chooses, generic and custom, over tens of thousands of settled requests analysed as
autovacuum would have it, inside one transaction that is rolled back."""

from __future__ import annotations

import uuid

import asyncpg
import pytest

from downstreams.warehouse.batch_book import BatchBook
from downstreams.warehouse.handlers import answer, answer_lookup, intent_hash
from downstreams.warehouse.repository import SCHEMA
from shared.config import Settings
from shared.contracts.effect_requests import EffectLookupRequested
from shared.db.schemas import migrate_service
from shared.downstream.capability_check import CapabilityCheck
from shared.identity import capability_keys
from shared.runs import RunKey
from tests.support.capabilities import effect_request
from tests.support.downstream_history import settled_keys_and_fences
from tests.support.plans import Explaining, overestimated_scans, whole_table_reads
from tests.support.transactions import rolled_back

pytestmark = pytest.mark.infra

HISTORY = 40_000
HOT_TABLES = {"stock", "reservations", "releases", "shipments", "idempotency_keys", "fences"}


@pytest.fixture(autouse=True)
async def migrated(pool):
    """Every index this release has: the plans are of this release's schema."""
    await migrate_service(pool, SCHEMA)


async def fill_history(conn: asyncpg.Connection, prefix: str) -> None:
    """Per request of the history: a SKU's stock, a reservation of it, a shipment, its settled
    key and its run's fence; one reservation in three released."""
    await conn.execute(
        f"INSERT INTO {SCHEMA}.stock (sku, available) SELECT $1 || 'sku-' || g, 1000"
        " FROM generate_series(1, $2::int) AS g", prefix, HISTORY)
    await conn.execute(
        f"INSERT INTO {SCHEMA}.reservations (reservation_id, tenant, sku, order_id, quantity,"
        " operation_key, logical_call_id, attempt, fence) SELECT 'tenant/acme/' || $1 || 'res-'"
        " || g, 'acme', $1 || 'sku-' || g, 'tenant/acme/' || $1 || 'o-' || g, 1,"
        " $1 || 'key-' || g, gen_random_uuid(), 1, 1 FROM generate_series(1, $2::int) AS g",
        prefix, HISTORY)
    await conn.execute(
        f"INSERT INTO {SCHEMA}.releases (reservation_id, quantity, operation_key, logical_call_id,"
        " attempt, fence) SELECT 'tenant/acme/' || $1 || 'res-' || g, 1, $1 || 'release-' || g,"
        " gen_random_uuid(), 1, 1 FROM generate_series(3, $2::int, 3) AS g", prefix, HISTORY)
    await conn.execute(
        f"INSERT INTO {SCHEMA}.shipments (shipment_id, tenant, order_id, address, operation_key,"
        " logical_call_id, attempt, fence) SELECT $1 || 'shp-' || g, 'acme', 'tenant/acme/' || $1"
        " || 'o-' || g, 'Quay 7', $1 || 'ship-' || g, gen_random_uuid(), 1, 1"
        " FROM generate_series(1, $2::int) AS g", prefix, HISTORY)
    await settled_keys_and_fences(conn, SCHEMA, prefix, HISTORY)
    await conn.execute(f"ANALYZE {SCHEMA}.stock, {SCHEMA}.reservations, {SCHEMA}.releases,"
                       f" {SCHEMA}.shipments, {SCHEMA}.idempotency_keys, {SCHEMA}.fences")


async def test_answering_a_batch_reads_no_whole_table(pool):
    """A reservation of an old SKU, the release of an old reservation, a shipment, an old key
    sent again with another request, and a lookup of an old key: every row they touch is found
    among tens of thousands by its key."""
    prefix = f"history-{uuid.uuid4().hex[:6]}-"
    run = RunKey("acme", f"{prefix}run-7")
    order = f"tenant/acme/{prefix}o-new"
    requests = [
        effect_request(f"{prefix}new-1", {"sku": f"{prefix}sku-7", "order_id": order,
                                          "quantity": 2}, tool="inventory.reserve", fence=2),
        effect_request(f"{prefix}new-2", {"reservation_id": f"tenant/acme/{prefix}res-8"},
                       tool="inventory.release", fence=2),
        effect_request(f"{prefix}new-3", {"order_id": order, "address": "Quay 9"},
                       tool="shipment.schedule", fence=2),
        effect_request(f"{prefix}key-11", {"sku": f"{prefix}sku-11", "order_id": order,
                                           "quantity": 5}, tool="inventory.reserve", fence=2),
    ]
    lookup = EffectLookupRequested(
        operation_key=f"{prefix}key-12", tool_name="inventory.reserve", attempt=2, fence=2,
        tenant_id="acme", logical_call_id=uuid.uuid4(), reply_topic="receipts")
    check = CapabilityCheck(capability_keys.public_keys(Settings()))
    async with rolled_back(pool) as conn:
        await fill_history(conn, prefix)
        explaining = Explaining(conn)
        book = await BatchBook.load(
            explaining, [(run, 2)] * 5,  # type: ignore[arg-type]
            {r.operation_key: intent_hash(r) for r in requests}, [lookup.operation_key],
            requests)
        answers = [await answer(book, run.run_id, request, check) for request in requests]
        looked_up = answer_lookup(book, run.run_id, lookup)
        await book.flush(explaining)  # type: ignore[arg-type]
        stock = await conn.fetch(f"SELECT sku, available FROM {SCHEMA}.stock WHERE sku = ANY($1)",
                                 [f"{prefix}sku-7", f"{prefix}sku-8", f"{prefix}sku-11"])

    assert [(a.status, a.reason) for a in answers] == [
        ("applied", None), ("applied", None), ("applied", None),
        ("rejected", "operation_key_reused")]
    assert (looked_up.status, looked_up.replayed) == ("applied", True)
    assert {row["sku"]: row["available"] for row in stock} == {
        f"{prefix}sku-7": 998, f"{prefix}sku-8": 1001, f"{prefix}sku-11": 1000}
    assert len({sql for _, sql, _ in explaining.plans}) == 6
    assert whole_table_reads(explaining.plans, HOT_TABLES) == []
    assert overestimated_scans(explaining.plans, HOT_TABLES, HISTORY // 100) == []
