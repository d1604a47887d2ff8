"""The wallet's hot path on a ledger with history: the statements a consumed batch of requests
sends (its runs' fences and its keys claimed and read, its wallets and debits locked, the one
write) read no whole table and expect no share of one, so answering does not slow as debits,
keys and fences pile up (every request leaves its key, and every run its fence, for good).
They are the downstream SDK's statements (``shared.downstream.batch_keys``) that any
downstream built on it sends. Checked on the plans PostgreSQL chooses, generic and custom,
over a thousand and over tens of thousands of settled requests analysed as autovacuum would
have it, inside one transaction that is rolled back."""

from __future__ import annotations

import uuid

import asyncpg
import pytest

from downstreams.wallet.answers import Lookup, answer, answer_lookup
from downstreams.wallet.batch_book import BatchBook
from downstreams.wallet.repository import SCHEMA
from shared.config import Settings
from shared.db.schemas import migrate_service
from shared.downstream.capability_check import CapabilityCheck
from shared.identity import capability_keys
from shared.runs import RunKey
from tests.support.downstream_history import settled_keys_and_fences
from tests.support.plans import (Explaining, overestimated_scans, plans_made, unprepared,
                                 whole_table_reads)
from tests.support.transactions import rolled_back
from tests.support.capabilities import effect_request
from tests.support.wallet import debit, new_wallet

pytestmark = pytest.mark.infra

HOT_TABLES = {"wallets", "debits", "refunds", "idempotency_keys", "fences"}


@pytest.fixture(autouse=True)
async def migrated(pool):
    """Every index this release has: the plans are of this release's schema."""
    await migrate_service(pool, SCHEMA)


async def fill_history(conn: asyncpg.Connection, prefix: str, history: int) -> None:
    """A wallet, a debit, a settled key and a run's fence per request of the history; a
    refund for one debit in ten."""
    await conn.execute(
        f"INSERT INTO {SCHEMA}.wallets (id, tenant, currency, balance_minor)"
        " SELECT $1 || 'w-' || g, 'acme', 'EUR', 1000000 FROM generate_series(1, $2::int) AS g",
        prefix, history)
    await conn.execute(
        f"INSERT INTO {SCHEMA}.debits (debit_id, wallet_id, amount_minor, currency, operation_key,"
        " logical_call_id, attempt, fence) SELECT $1 || 'd-' || g, $1 || 'w-' || g, 100, 'EUR',"
        " $1 || 'key-' || g, gen_random_uuid(), 1, 1 FROM generate_series(1, $2::int) AS g",
        prefix, history)
    await conn.execute(
        f"INSERT INTO {SCHEMA}.refunds (refund_id, debit_id, wallet_id, amount_minor, currency,"
        " operation_key, logical_call_id, attempt, fence) SELECT $1 || 'r-' || g, $1 || 'd-' || g,"
        " $1 || 'w-' || g, 10, 'EUR', $1 || 'refund-' || g, gen_random_uuid(), 1, 1"
        " FROM generate_series(10, $2::int, 10) AS g", prefix, history)
    await settled_keys_and_fences(conn, SCHEMA, prefix, history)
    await conn.execute(f"ANALYZE {SCHEMA}.wallets, {SCHEMA}.debits, {SCHEMA}.refunds,"
                       f" {SCHEMA}.idempotency_keys, {SCHEMA}.fences")


@pytest.mark.parametrize("history", [1_000, 40_000])
async def test_answering_a_batch_reads_no_whole_table(pool, history):
    """A debit of a wallet with history under a new key, a refund of an old debit, an old key
    sent again with another request, and a lookup of an old key: every row they touch is
    found by its key, among a thousand (a benchmark's ledger) or tens of thousands. (Without
    the index of refunds by debit, the refund's read of what was refunded already reads every
    refund, and this fails.)"""
    prefix = f"history-{uuid.uuid4().hex[:6]}-"
    run = RunKey("acme", f"{prefix}run-7")
    requests = [
        effect_request(f"{prefix}new-1", debit(f"{prefix}w-7", 100), fence=2),
        effect_request(f"{prefix}new-2", debit(f"{prefix}w-9", 50) | {"debit_id": f"{prefix}d-9"},
                       tool="wallet.refund", fence=2),
        effect_request(f"{prefix}key-11", debit(f"{prefix}w-11", 100), fence=2),
    ]
    lookup = Lookup(run_id=run.run_id, tenant_id="acme", operation_key=f"{prefix}key-12",
                    fence=2, attempt=2, logical_call_id=uuid.uuid4())
    check = CapabilityCheck(capability_keys.public_keys(Settings()))
    async with rolled_back(pool) as conn:
        await fill_history(conn, prefix, history)
        explaining = Explaining(conn)
        book = await BatchBook.load(explaining, [(run, 2)] * 4,  # type: ignore[arg-type]
                                    requests, [lookup.operation_key])
        answers = [await answer(book, run.run_id, request, check) for request in requests]
        await answer_lookup(book, lookup)
        await book.flush(explaining)  # type: ignore[arg-type]
        written = await conn.fetchval(f"SELECT count(*) FROM {SCHEMA}.debits"
                                      " WHERE operation_key = $1", f"{prefix}new-1")

    assert [(a.status, a.reason) for a in answers] == [
        ("applied", None), ("applied", None), ("rejected", "operation_key_reused")]
    assert written == 1
    assert len({sql for _, sql, _ in explaining.plans}) == 5
    assert whole_table_reads(explaining.plans, HOT_TABLES) == []
    assert overestimated_scans(explaining.plans, HOT_TABLES, max(history // 100, 10)) == []


async def test_a_batch_s_write_is_planned_once_per_connection(pool, endpoints):
    """The SDK's statements (``BatchKeys``: the fences and keys locked, the one write) name
    their rows in arrays; shown their values, PostgreSQL planned the write afresh on every
    batch, at more than it cost to run. Hidden (``shared.db.plans``), each keeps its generic
    plan after five custom ones, and every debit is still written."""
    wallet, tag = await new_wallet(pool), uuid.uuid4().hex[:8]
    check = CapabilityCheck(capability_keys.public_keys(Settings()))
    async with unprepared(endpoints.database_url) as conn:
        # At the packaged random_page_cost (4), as a server of one's own may run: there, shown
        # their arrays, PostgreSQL kept planning these afresh (bench/README.md, "Keys, not scans").
        await conn.execute("SET LOCAL random_page_cost = 4")
        for n in range(8):  # batches of one and of two debits, as a consumer's are
            run = RunKey("acme", f"run-{tag}-{n}")
            requests = [effect_request(f"{tag}:{n}:{m}", debit(wallet, 10))
                        for m in range(1 + n % 2)]
            book = await BatchBook.load(conn, [(run, 1)] * len(requests), requests, [])
            answers = [await answer(book, run.run_id, request, check) for request in requests]
            assert {a.status for a in answers} == {"applied"}
            await book.flush(conn)
        written = await conn.fetchval(f"SELECT count(*) FROM {SCHEMA}.debits WHERE wallet_id = $1",
                                      wallet)
        plans = [await plans_made(conn, like) for like in (
            'INSERT INTO "wallet".fences%', "WITH claimed AS (INSERT INTO%",
            "WITH w AS (UPDATE wallet.wallets%")]

    assert written == 12
    assert plans == [(5, 3)] * 3
