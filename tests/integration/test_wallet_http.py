"""The reference wallet's HTTP API on real PostgreSQL (and Kafka, which the process also serves),
driven by the dispatcher's HTTP adapter and, where the exact HTTP contract is the point, by a
plain client. Every outcome is checked against the wallet's own rows."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta

import aiohttp
import pytest

from services.dispatcher.adapters.http import HttpEffectAdapter
from shared.db.schemas import migrate_service
from downstreams.wallet.main import run_wallet
from downstreams.wallet.repository import SCHEMA
from downstreams.wallet.settings import WalletSettings
from shared import faults
from shared.config import Endpoints, Settings
from tests.support.capabilities import capability_for
from tests.support.http_effects import http_tool, order
from tests.support.ports import free_port
from tests.support.kafka import unique_topic, wait_for
from tests.support.processes import ServiceProcess
from tests.support.wallet import (balance, debit, debits_under, key_settled, new_key,
                                  new_wallet)

pytestmark = pytest.mark.infra


@pytest.fixture(autouse=True)
async def wallet_schema(pool) -> None:
    await migrate_service(pool, SCHEMA)


@pytest.fixture
async def adapter():
    adapter = HttpEffectAdapter()
    yield adapter
    await adapter.close()


def wallet_env(port: int) -> WalletSettings:
    """Its own topics, so this wallet never takes another test's Kafka requests."""
    return WalletSettings(request_topic=unique_topic("effects.wallet"),
                          reply_topic=unique_topic("effects.receipts"), http_port=port)


@asynccontextmanager
async def http_wallet(endpoints: Endpoints) -> AsyncIterator[str]:
    """The wallet in this event loop; leaving stops it as SIGTERM would (requests in flight end)."""
    port, stopping = free_port(), asyncio.Event()
    settings = Settings(kafka_bootstrap=endpoints.kafka_bootstrap, database_url=endpoints.database_url)
    task = asyncio.create_task(run_wallet(settings, wallet_env(port), stopping))
    url = f"http://127.0.0.1:{port}"
    try:
        assert await wait_for(lambda: healthy(url, task), timeout=60), "the wallet never answered"
        yield url
    finally:
        stopping.set()
        await task


async def healthy(url: str, task: asyncio.Task | None = None) -> bool:
    if task is not None and task.done():
        task.result()  # a wallet that died at start says why
    try:
        async with aiohttp.ClientSession() as session, session.get(f"{url}/healthz") as response:
            return response.status == 200
    except aiohttp.ClientConnectionError:
        return False


def call_headers(key: str, *, fence: int = 1, attempt: int = 1, deadline_in: float = 60.0) -> dict:
    return {"Idempotency-Key": key, "Intentledger-Run-Id": f"run-{key}", "Intentledger-Tenant": "acme",
            "Intentledger-Fence": str(fence), "Intentledger-Attempt": str(attempt),
            "Intentledger-Logical-Call-Id": str(uuid.uuid5(uuid.NAMESPACE_URL, key)),
            "Intentledger-Deadline": (datetime.now(UTC) + timedelta(seconds=deadline_in)).isoformat()}


async def post(url: str, headers: dict, arguments: dict | None = None, *,
               body: object = None) -> tuple[int, dict, dict]:
    """A plain POST /effects: (status, response headers, JSON body)."""
    key = headers.get("Idempotency-Key", "none")
    capability = capability_for(key, "wallet.debit", arguments or {},
                                uuid.uuid5(uuid.NAMESPACE_URL, key)).model_dump(mode="json")
    payload = body if body is not None else {"tool_name": "wallet.debit", "tool_version": "1",
                                             "canonical_arguments": arguments,
                                             "capability": capability}
    async with aiohttp.ClientSession() as session, session.post(
            f"{url}/effects", headers=headers,
            **({"data": payload} if isinstance(payload, str) else {"json": payload})) as response:
        return response.status, dict(response.headers), await response.json()


async def get(url: str, key: str, headers: dict) -> tuple[int, dict]:
    async with aiohttp.ClientSession() as session, session.get(
            f"{url}/effects/{key}", headers=headers) as response:
        return response.status, await response.json()


@pytest.fixture
def configured_faults():
    yield faults.configure
    faults.configure("")


async def test_a_debit_is_applied_once_and_a_replay_returns_the_same_receipt(pool, endpoints):
    wallet, key = await new_wallet(pool), new_key()
    async with http_wallet(endpoints) as url:
        first = await post(url, call_headers(key), debit(wallet))
        again = await post(url, call_headers(key, attempt=2), debit(wallet))
    (status, headers, receipt), (status_2, headers_2, replay) = first, again
    assert status == 200 and receipt["status"] == "applied" and receipt["replayed"] is False
    assert "Idempotent-Replayed" not in headers
    assert status_2 == 200 and headers_2["Idempotent-Replayed"] == "true"
    assert replay["replayed"] is True and replay["attempt"] == 2
    assert (replay["receipt_id"], replay["result"]) == (receipt["receipt_id"], receipt["result"])
    assert await debits_under(pool, key) == 1 and await balance(pool, wallet) == 6000


async def test_the_same_key_with_other_arguments_is_refused_with_422(pool, endpoints):
    wallet, key = await new_wallet(pool), new_key()
    async with http_wallet(endpoints) as url:
        await post(url, call_headers(key), debit(wallet))
        status, _, receipt = await post(url, call_headers(key, attempt=2), debit(wallet, 4100))
    assert status == 422 and receipt["status"] == "rejected"
    assert receipt["reason"] == "operation_key_reused"
    assert await debits_under(pool, key) == 1 and await balance(pool, wallet) == 6000


async def test_a_request_below_a_higher_fence_is_409_and_applies_nothing(pool, endpoints):
    wallet, key, old = await new_wallet(pool), new_key(), new_key()
    old_owner = call_headers(old, fence=1) | {"Intentledger-Run-Id": f"run-{key}"}
    async with http_wallet(endpoints) as url:
        applied, _, _ = await post(url, call_headers(key, fence=2), debit(wallet))
        status, _, receipt = await post(url, old_owner, debit(wallet, 1000))
        lookup_status, _ = await get(url, key, call_headers(key, fence=1))
    assert applied == 200
    assert status == 409 and (receipt["status"], receipt["reason"]) == ("stale", "stale_fence")
    assert lookup_status == 409
    assert await debits_under(pool, old) == 0 and not await key_settled(pool, old)


async def test_a_lookup_returns_the_recorded_answer_or_404(pool, endpoints, adapter):
    wallet, key = await new_wallet(pool), new_key()
    async with http_wallet(endpoints) as url:
        tool = http_tool(url)
        applied = await adapter.perform(order(tool, key, debit(wallet)))
        found = await adapter.perform(order(tool, key, kind="lookup", attempt=2))
        missing = await adapter.perform(order(tool, new_key(), kind="lookup"))
        status, receipt = await get(url, key, call_headers(key, attempt=3))
    assert applied.status == "applied" and applied.replayed is False
    assert found.status == "applied" and found.replayed is True
    assert (found.receipt_id, found.result) == (applied.receipt_id, applied.result)
    assert missing.status == "not_found"
    assert status == 200 and receipt["attempt"] == 3 and receipt["replayed"] is True
    assert await debits_under(pool, key) == 1


async def test_a_request_past_its_deadline_is_422_and_leaves_the_key_unsettled(pool, endpoints):
    wallet, key = await new_wallet(pool), new_key()
    async with http_wallet(endpoints) as url:
        status, _, receipt = await post(url, call_headers(key, deadline_in=-1), debit(wallet))
        lookup_status, not_found = await get(url, key, call_headers(key))
    assert status == 422 and receipt["reason"] == "deadline_passed"
    assert lookup_status == 404 and not_found["status"] == "not_found"
    assert await debits_under(pool, key) == 0 and not await key_settled(pool, key)


@pytest.mark.parametrize("change, error", [
    (lambda h: h.pop("Intentledger-Fence"), "missing header Intentledger-Fence"),
    (lambda h: h.update({"Intentledger-Fence": "two"}), "Intentledger-Fence"),
    (lambda h: h.update({"Intentledger-Fence": "-1"}), "Intentledger-Fence"),
    (lambda h: h.update({"Intentledger-Deadline": "2030-01-01T00:00:00"}), "Intentledger-Deadline"),
    (lambda h: h.update({"Intentledger-Logical-Call-Id": "call-1"}), "Intentledger-Logical-Call-Id"),
    (lambda h: h.update({"Intentledger-Fence": str(2**63)}), "Intentledger-Fence"),
    (lambda h: h.update({"Intentledger-Attempt": str(2**31)}), "Intentledger-Attempt"),
], ids=["no fence", "fence not a number", "negative fence", "deadline without offset",
        "call id not a uuid", "fence beyond bigint", "attempt beyond integer"])
async def test_a_malformed_request_is_400_and_touches_nothing(pool, endpoints, change, error):
    wallet, key = await new_wallet(pool), new_key()
    headers = call_headers(key)
    change(headers)
    async with http_wallet(endpoints) as url:
        status, _, body = await post(url, headers, debit(wallet))
        not_json = await post(url, call_headers(key), body="{not json")
        too_deep = await post(url, call_headers(key), body="[" * 100_000 + "]" * 100_000)
        not_a_number = await post(url, call_headers(key), body='{"tool_name": NaN}')
        extra = await post(url, call_headers(key), body={"tool_name": "wallet.debit", "attempt": 9})
    assert status == 400 and error in body["error"]
    assert not_json[0] == extra[0] == too_deep[0] == not_a_number[0] == 400
    assert "error" in not_json[2]
    assert not await key_settled(pool, key) and await balance(pool, wallet) == 10_000


async def test_an_injected_503_applies_nothing_and_means_what_the_tool_declares(
        pool, endpoints, adapter, configured_faults):
    wallet, key = await new_wallet(pool), new_key()
    configured_faults("wallet.http.fail=drop")
    async with http_wallet(endpoints) as url:
        unknown = await adapter.perform(order(http_tool(url), key, debit(wallet)))
        transient = await adapter.perform(order(http_tool(url, server_errors="not_applied"), key,
                                                debit(wallet), attempt=2))
        configured_faults("")
        applied = await adapter.perform(order(http_tool(url), key, debit(wallet), attempt=3))
    assert (unknown.status, unknown.detail) == ("unknown", "HTTP 503")
    assert transient.status == "transient"
    assert applied.status == "applied" and applied.replayed is False
    assert await debits_under(pool, key) == 1


async def test_a_response_lost_after_commit_is_unknown_and_a_lookup_finds_the_one_debit(
        pool, endpoints, adapter, configured_faults):
    wallet, key = await new_wallet(pool), new_key()
    configured_faults("wallet.http.after_commit_drop_response=drop@1")
    async with http_wallet(endpoints) as url:
        tool = http_tool(url)
        lost = await adapter.perform(order(tool, key, debit(wallet)))
        found = await adapter.perform(order(tool, key, kind="lookup", attempt=2))
        resent = await adapter.perform(order(tool, key, debit(wallet), attempt=3))
    assert (lost.status, lost.detail) == ("unknown", "server disconnected")
    assert found.status == "applied" and found.result["balance_minor"] == 6000
    assert resent.status == "applied" and resent.replayed is True
    assert resent.receipt_id == found.receipt_id
    assert await debits_under(pool, key) == 1 and await balance(pool, wallet) == 6000


async def test_a_wallet_slower_than_the_deadline_is_unknown_and_applies_nothing(
        pool, endpoints, adapter, configured_faults):
    wallet, key = await new_wallet(pool), new_key()
    configured_faults("wallet.delay=delay:1.5@1")
    async with http_wallet(endpoints) as url:
        outcome = await adapter.perform(order(http_tool(url), key, debit(wallet), seconds=0.5))
    # Leaving the block stopped the wallet, which first let the slow request finish.
    assert (outcome.status, outcome.detail) == ("unknown", "timeout after 0.5 s")
    assert await debits_under(pool, key) == 0 and not await key_settled(pool, key)


async def test_a_refusing_wallet_answers_422_applies_nothing_and_a_later_attempt_applies(
        pool, endpoints, adapter, configured_faults):
    wallet, key = await new_wallet(pool), new_key()
    configured_faults("wallet.refuse=drop@1")
    async with http_wallet(endpoints) as url:
        refused = await adapter.perform(order(http_tool(url), key, debit(wallet)))
        missing = await adapter.perform(order(http_tool(url), key, kind="lookup", attempt=2))
        applied = await adapter.perform(order(http_tool(url), key, debit(wallet), attempt=3))
    assert (refused.status, refused.reason) == ("rejected", "refused")
    assert missing.status == "not_found"
    assert applied.status == "applied" and applied.replayed is False
    assert await debits_under(pool, key) == 1


async def test_the_wallet_process_serves_http_and_stops_on_sigterm(pool, endpoints, adapter, tmp_path):
    wallet, key, port = await new_wallet(pool), new_key(), free_port()
    topics = wallet_env(port)
    process = ServiceProcess("wallet", endpoints, tmp_path / "wallet.log", env={
        "INTENTLEDGER_WALLET_HTTP_PORT": str(port),
        "INTENTLEDGER_WALLET_REQUEST_TOPIC": topics.request_topic,
        "INTENTLEDGER_WALLET_REPLY_TOPIC": topics.reply_topic}).start()
    url = f"http://127.0.0.1:{port}"
    try:
        assert await wait_for(lambda: healthy(url), timeout=60), process.log_lines()
        outcome = await adapter.perform(order(http_tool(url), key, debit(wallet)))
    finally:
        exit_code = process.stop()
    assert outcome.status == "applied" and await debits_under(pool, key) == 1
    assert exit_code == 0
    after = await adapter.perform(order(http_tool(url), key, debit(wallet), attempt=2))
    assert after.status == "transient"  # nobody listens: refused, nothing sent


async def test_the_audit_api_lists_a_window_page_by_page_and_refuses_malformed_questions(
        pool, endpoints):
    """Seven debits in a window of their own, three to a page: all seven, oldest first, none
    twice, each with the key it was applied under; the same by key; bad questions are 400."""
    wallet = await new_wallet(pool)
    start = datetime.now(UTC)
    keys = []
    for n in range(7):
        keys.append(key := new_key())
        await pool.execute(
            "INSERT INTO wallet.debits (debit_id, wallet_id, amount_minor, currency, operation_key,"
            " logical_call_id, attempt, fence, created_at) VALUES ($1, $2, 100, 'EUR', $3, $4, 1,"
            " 1, $5)", f"d-{uuid.uuid4()}", wallet, key, uuid.uuid4(),
            start - timedelta(days=3650, seconds=-n))
    since = start - timedelta(days=3650)
    async with http_wallet(endpoints) as url, aiohttp.ClientSession() as session:
        listed, query = [], {"tool_name": "wallet.debit", "since": since.isoformat(),
                             "until": (since + timedelta(seconds=7)).isoformat(), "limit": "3"}
        while True:
            async with session.get(f"{url}/audit/effects", params=query) as response:
                page = await response.json()
            listed += page["effects"]
            if page["next"] is None:
                break
            query["after"] = page["next"]
        async with session.post(f"{url}/audit/effects/by-key", json={
                "tool_name": "wallet.debit", "operation_keys": keys[:2] + [new_key()]}) as response:
            found = await response.json()
        refused = []
        for params in ({"tool_name": "wallet.nope", "since": since.isoformat(),
                        "until": start.isoformat()},
                       {"tool_name": "wallet.debit", "since": "yesterday", "until": start.isoformat()},
                       {"tool_name": "wallet.debit", "since": since.isoformat(),
                        "until": start.isoformat(), "limit": "0"}):
            async with session.get(f"{url}/audit/effects", params=params) as response:
                refused.append((response.status, "error" in await response.json()))
        async with session.post(f"{url}/audit/effects/by-key",
                                json={"tool_name": "wallet.debit", "operation_keys": []}) as response:
            refused.append((response.status, "error" in await response.json()))
    assert [effect["operation_key"] for effect in listed] == keys
    assert {effect["tenant_id"] for effect in listed} == {"acme"}
    assert sorted(effect["operation_key"] for effect in found["effects"]) == sorted(keys[:2])
    assert refused == [(400, True)] * 4
