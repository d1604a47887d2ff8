"""The wallet's two books, one behaviour: a batch decided through ``BatchBook`` (the Kafka
adapter's, one transaction and a constant number of statements) answers and writes exactly
what the same requests answered one by one through ``SqlBook`` (the HTTP API's) do."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from downstreams.wallet.answers import Lookup, answer, answer_lookup
from downstreams.wallet.batch_book import BatchBook
from shared.downstream.batch_keys import RaceLost
from downstreams.wallet.book import SqlBook
from downstreams.wallet.repository import SCHEMA
from shared.config import Settings
from shared.contracts.effect_requests import EffectRequested
from shared.db.schemas import migrate_service
from shared.downstream.capability_check import CapabilityCheck
from shared.identity import capability_keys
from shared.runs import RunKey
from tests.support.statements import counted
from tests.support.capabilities import effect_request
from tests.support.wallet import debit, new_wallet

pytestmark = pytest.mark.infra
Asked = tuple[str, EffectRequested | Lookup]


@pytest.fixture
async def check(pool) -> CapabilityCheck:
    await migrate_service(pool, SCHEMA)
    return CapabilityCheck(capability_keys.public_keys(Settings()))


def _request(run: str, key: str, arguments: dict, **options) -> Asked:
    return run, effect_request(key, arguments, **options)


def _lookup(run: str, key: str, fence: int = 1) -> Asked:
    return run, Lookup(run_id=run, tenant_id="acme", operation_key=key, fence=fence, attempt=2,
                       logical_call_id=uuid.uuid5(uuid.NAMESPACE_URL, key))


async def _scenario(pool) -> tuple[str, str, list[Asked]]:
    """Every answer that depends on what the requests before it in the batch did."""
    wallet, tag = await new_wallet(pool), uuid.uuid4().hex[:8]
    first, second = f"run-a-{tag}", f"run-b-{tag}"
    async with pool.acquire() as conn, conn.transaction():  # a debit of before, to refund
        _, setup = _request(first, f"{tag}:setup", debit(wallet, 2000))
        receipt = await answer(SqlBook(conn), first, setup, CapabilityCheck(
            capability_keys.public_keys(Settings())))
    refund = debit(wallet, 1500) | {"debit_id": receipt.result["debit_id"]}
    return wallet, tag, [
        _request(first, f"{tag}:k1", debit(wallet)),
        _request(first, f"{tag}:k1", debit(wallet)),  # replayed
        _request(first, f"{tag}:k1", debit(wallet, 5000)),  # the key is someone else's
        _request(first, f"{tag}:k2", debit(wallet, 7000)),  # more than is left
        _lookup(first, f"{tag}:k1"), _lookup(first, f"{tag}:k9"),
        _request(first, f"{tag}:k3", debit(wallet, 100), late=True),  # refused, key released
        _request(first, f"{tag}:k3", debit(wallet, 100)),  # ... so this one is new
        _request(first, f"{tag}:k4", debit(wallet, 100), signed=False),
        _request(first, f"{tag}:r1", refund, tool="wallet.refund"),
        _request(first, f"{tag}:r2", refund, tool="wallet.refund"),  # more than the debit
        _request(second, f"{tag}:k5", debit(wallet, 100), fence=3),
        _request(second, f"{tag}:k6", debit(wallet, 100), fence=2),  # stale
        _lookup(second, f"{tag}:k5", fence=2),  # stale too
        _request(second, f"{tag}:k7", debit(wallet, 100), fence=4)]


def _shown(receipt) -> tuple:
    result = {k: v for k, v in (receipt.result or {}).items() if not k.endswith("_id")}
    return receipt.status, receipt.reason, receipt.replayed, result


async def _state(pool, wallet: str, tag: str) -> tuple:
    return (await pool.fetchrow(f"SELECT balance_minor, version FROM {SCHEMA}.wallets "
                                "WHERE id = $1", wallet),
            await pool.fetchval(f"SELECT count(*) FROM {SCHEMA}.debits WHERE wallet_id = $1", wallet),
            await pool.fetchval(f"SELECT coalesce(sum(amount_minor), 0) FROM {SCHEMA}.refunds "
                                "WHERE wallet_id = $1", wallet),
            [(row["k"], row["s"]) for row in await pool.fetch(
                f"SELECT split_part(operation_key, ':', 2) AS k, response->>'status' AS s "
                f"FROM {SCHEMA}.idempotency_keys WHERE operation_key LIKE $1 ORDER BY 1",
                f"{tag}:%")],
            [row["fence"] for row in await pool.fetch(
                f"SELECT fence FROM {SCHEMA}.fences WHERE scope LIKE $1 ORDER BY scope",
                f"%-{tag}\"]")])


async def _one_by_one(pool, asked: list[Asked], check: CapabilityCheck) -> list[tuple]:
    shown = []
    for run, question in asked:
        async with pool.acquire() as conn, conn.transaction():
            book = SqlBook(conn)
            shown.append(_shown(await answer_lookup(book, question) if isinstance(question, Lookup)
                                else await answer(book, run, question, check)))
    return shown


async def _as_a_batch(conn, asked: list[Asked], check: CapabilityCheck) -> list[tuple]:
    shown = []
    async with conn.transaction():
        book = await BatchBook.load(
            conn, [(RunKey("acme", run), question.fence) for run, question in asked],
            [q for _, q in asked if isinstance(q, EffectRequested)],
            [q.operation_key for _, q in asked if isinstance(q, Lookup)])
        for run, question in asked:
            shown.append(_shown(await answer_lookup(book, question) if isinstance(question, Lookup)
                                else await answer(book, run, question, check)))
        await book.flush(conn)
    return shown


async def test_a_batch_answers_and_writes_what_its_requests_one_by_one_do(pool, check):
    wallet, tag, asked = await _scenario(pool)
    expected = await _one_by_one(pool, asked, check)
    reference = await _state(pool, wallet, tag)
    other_wallet, other_tag, other = await _scenario(pool)

    async with pool.acquire() as conn:
        assert await _as_a_batch(conn, other, check) == expected
    assert await _state(pool, other_wallet, other_tag) == reference
    assert {status for status, *_ in expected} == {"applied", "rejected", "stale", "not_found"}
    assert {reason for _, reason, *_ in expected} >= {
        "operation_key_reused", "insufficient_funds", "deadline_passed", "refund_exceeds_debit"}


async def test_a_batch_takes_as_many_statements_for_one_request_as_for_twenty(pool, check):
    async def statements(count: int) -> int:
        wallet = await new_wallet(pool, 100_000)
        asked = [_request(f"run-{uuid.uuid4().hex[:8]}", f"op-{uuid.uuid4().hex[:12]}",
                          debit(wallet, 100)) for _ in range(count)]
        async with pool.acquire() as conn:
            with counted(conn) as queries:
                await _as_a_batch(conn, asked, check)
        return len(queries)

    assert await statements(1) == await statements(20)


async def test_a_batch_that_waited_on_a_key_claimed_meanwhile_is_taken_again_and_replays(
        pool, check):
    wallet, key = await new_wallet(pool), f"op-{uuid.uuid4().hex[:12]}"
    asked = [_request(f"run-{uuid.uuid4().hex[:8]}", key, debit(wallet, 100))]

    async def batch() -> list[tuple]:
        async with pool.acquire() as conn:
            return await _as_a_batch(conn, asked, check)

    async with pool.acquire() as conn, conn.transaction():  # the HTTP API, answering first
        run, question = _request(f"run-{uuid.uuid4().hex[:8]}", key, debit(wallet, 100))
        await answer(SqlBook(conn), run, question, check)
        waiting = asyncio.create_task(batch())
        await asyncio.sleep(0.5)
        assert not waiting.done(), "the batch's claim waits on the key"
    with pytest.raises(RaceLost):  # rolled back: the consumer delivers the batch again
        await waiting
    assert await batch() == [("applied", None, True, {"balance_minor": 9900})]
