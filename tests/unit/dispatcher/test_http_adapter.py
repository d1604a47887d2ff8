"""The HTTP adapter classifies what it saw, and nothing more: a local server scripted per test
answers each status, stalls, drops the connection or sends too much; the adapter must say
applied, rejected, not_found, stale, transient or unknown exactly as ``orders.py`` defines them,
and send each request exactly once."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Awaitable, Callable

import pytest
from aiohttp import web

from services.dispatcher.adapters.http import HttpEffectAdapter
from shared.contracts.effect_requests import EffectReceipt
from tests.support.http_effects import http_tool, order
from tests.support.ports import free_port

KEY = "run-7:order/7:debit"  # a "/" in the key must survive the lookup's URL
RESULT = {"debit_id": "d-1", "balance_minor": 6000}
Answer = Callable[[web.Request], Awaitable[web.StreamResponse]]


class Server:
    """Answers every request with ``answer`` and remembers what it was sent."""

    def __init__(self) -> None:
        self.answer: Answer = reply(200)
        self.seen: list[tuple[str, str, dict[str, str], bytes]] = []
        self.release = asyncio.Event()
        self.url = ""

    async def handle(self, request: web.Request) -> web.StreamResponse:
        self.seen.append((request.method, request.raw_path, dict(request.headers),
                          await request.read()))
        return await self.answer(request)


def reply(status: int, body: dict | bytes | None = None, **headers: str) -> Answer:
    async def answer(request: web.Request) -> web.Response:
        data = body if isinstance(body, bytes) else json.dumps(body or {}).encode()
        return web.Response(status=status, body=data, headers=headers,
                            content_type="application/json")
    return answer


def receipt(status: str = "applied", key: str = KEY, **fields) -> dict:
    return EffectReceipt(operation_key=key, logical_call_id=uuid.uuid4(), attempt=1,
                         status=status, **fields).model_dump(mode="json")


@pytest.fixture
async def server():
    server = Server()
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", server.handle)
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=1)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    server.url = f"http://127.0.0.1:{runner.addresses[0][1]}/api/"
    yield server
    server.release.set()
    await runner.cleanup()


@pytest.fixture
async def adapter():
    adapter = HttpEffectAdapter()
    yield adapter
    await adapter.close()


async def test_a_send_posts_the_intent_under_its_key_and_an_applied_receipt_is_applied(server, adapter):
    receipt_id = uuid.uuid4()
    server.answer = reply(200, receipt(result=RESULT, receipt_id=receipt_id))
    sent = order(http_tool(server.url), KEY, {"wallet_id": "tenant/acme/w-1", "amount": 4000},
                 fence=3, attempt=2)
    outcome = await adapter.perform(sent)
    assert (outcome.status, outcome.result, outcome.receipt_id) == ("applied", RESULT, str(receipt_id))
    assert outcome.replayed is False and outcome.detail == "HTTP 200"
    [(method, path, headers, body)] = server.seen
    assert (method, path) == ("POST", "/api/effects")
    assert headers["Idempotency-Key"] == KEY and headers["Intentledger-Run-Id"] == sent.run_id
    assert headers["Intentledger-Tenant"] == sent.tenant_id  # the fence is the pair's
    assert (headers["Intentledger-Fence"], headers["Intentledger-Attempt"]) == ("3", "2")
    assert headers["Intentledger-Logical-Call-Id"] == str(sent.logical_call_id)
    assert headers["Intentledger-Deadline"] == sent.deadline_at.isoformat()
    assert json.loads(body) == {"tool_name": "wallet.debit", "tool_version": "1",
                                "canonical_arguments": sent.canonical_arguments,
                                "capability": sent.capability}  # the downstream checks it too


async def test_a_replayed_receipt_says_the_effect_was_not_repeated(server, adapter):
    server.answer = reply(200, receipt(result=RESULT, replayed=True), **{"Idempotent-Replayed": "true"})
    outcome = await adapter.perform(order(http_tool(server.url), KEY))
    assert outcome.status == "applied" and outcome.replayed is True


async def test_a_lookup_gets_the_key_in_the_path_and_no_idempotency_key(server, adapter):
    server.answer = reply(200, receipt(result=RESULT, replayed=True))
    outcome = await adapter.perform(order(http_tool(server.url), KEY, kind="lookup"))
    assert outcome.status == "applied" and outcome.replayed is True
    [(method, path, headers, _)] = server.seen
    assert (method, path) == ("GET", "/api/effects/run-7%3Aorder%2F7%3Adebit")
    assert "Idempotency-Key" not in headers and "Intentledger-Fence" in headers


@pytest.mark.parametrize("kind, status, body, expected, reason", [
    ("lookup", 404, receipt("not_found"), "not_found", None),
    ("send", 409, receipt("stale", reason="stale_fence"), "stale", "stale_fence"),
    ("lookup", 409, b"", "refused", "http_409"),
    ("send", 422, receipt("rejected", reason="operation_key_reused"), "rejected",
     "operation_key_reused"),
    ("send", 422, receipt("rejected", key="another-key"), "refused", "http_422"),
    ("send", 422, b"<html>nope</html>", "refused", "http_422"),
    ("send", 400, {"error": "missing header Intentledger-Fence"}, "refused", "http_400"),
    ("send", 404, b"", "refused", "http_404"),
    ("lookup", 404, b"<html>no route</html>", "refused", "http_404"),
    ("lookup", 403, {"error": "token expired"}, "refused", "http_403"),
    ("lookup", 422, b"", "refused", "http_422"),
    ("send", 429, b"", "transient", None),
    ("send", 302, b"", "unknown", None),
])
async def test_each_status_means_what_the_contract_says(server, adapter, kind, status, body,
                                                        expected, reason):
    server.answer = reply(status, body)
    outcome = await adapter.perform(order(http_tool(server.url), KEY, kind=kind))
    assert (outcome.status, outcome.reason) == (expected, reason)
    assert outcome.detail.startswith(f"HTTP {status}")
    assert len(server.seen) == 1  # a redirect is not followed


@pytest.mark.parametrize("server_errors, expected", [("unknown", "unknown"),
                                                     ("not_applied", "transient")])
async def test_a_5xx_is_transient_only_where_the_tool_says_it_applied_nothing(
        server, adapter, server_errors, expected):
    server.answer = reply(503, {"error": "busy"})
    outcome = await adapter.perform(order(http_tool(server.url, server_errors=server_errors), KEY))
    assert outcome.status == expected and outcome.detail.startswith("HTTP 503")


@pytest.mark.parametrize("body", [b"not json", json.dumps(receipt("rejected")).encode(),
                                  json.dumps(receipt(key="another-key")).encode()],
                         ids=["not a receipt", "not applied", "another key"])
async def test_a_2xx_without_an_applied_receipt_for_this_key_is_unknown(server, adapter, body):
    server.answer = reply(200, body)
    outcome = await adapter.perform(order(http_tool(server.url), KEY))
    assert outcome.status == "unknown" and "HTTP 200" in outcome.detail


async def test_an_oversized_2xx_is_applied_without_reading_its_result(server, adapter):
    tool = http_tool(server.url)
    huge = receipt(result={"blob": "x" * (tool.result_max_bytes + 4096)})
    server.answer = reply(200, huge, **{"Idempotent-Replayed": "true"})
    outcome = await adapter.perform(order(tool, KEY))
    assert (outcome.status, outcome.result, outcome.replayed) == ("applied", None, True)
    assert "over size limit" in outcome.detail


async def test_an_oversized_error_answer_is_unknown(server, adapter):
    tool = http_tool(server.url)
    server.answer = reply(422, b"x" * (tool.result_max_bytes + 4097))
    outcome = await adapter.perform(order(tool, KEY))
    assert outcome.status == "unknown" and "over size limit" in outcome.detail


async def test_no_answer_before_the_deadline_is_unknown_on_a_new_or_a_reused_connection(
        server, adapter):
    async def stall(request: web.Request) -> web.Response:
        await server.release.wait()
        return web.Response()
    server.answer = stall
    outcome = await adapter.perform(order(http_tool(server.url), KEY, seconds=0.5))
    assert outcome.status == "unknown" and outcome.detail == "timeout after 0.5 s"
    server.answer = reply(200, receipt())
    assert (await adapter.perform(order(http_tool(server.url), KEY))).status == "applied"
    server.answer = stall  # the kept-alive connection is reused
    outcome = await adapter.perform(order(http_tool(server.url), KEY, seconds=0.5))
    assert outcome.status == "unknown" and len(server.seen) == 3


@pytest.mark.parametrize("kind", ["send", "lookup"])
async def test_a_dropped_connection_is_unknown_and_is_not_resent(server, adapter, kind):
    async def drop(request: web.Request) -> web.Response:
        request.transport.abort()
        return web.Response()
    server.answer = drop
    outcome = await adapter.perform(order(http_tool(server.url), KEY, kind=kind))
    assert (outcome.status, outcome.detail) == ("unknown", "server disconnected")
    assert len(server.seen) == 1  # aiohttp alone would resend the GET once


async def test_a_refused_connection_is_transient_nothing_was_sent(adapter):
    outcome = await adapter.perform(order(http_tool(f"http://127.0.0.1:{free_port()}"), KEY))
    assert outcome.status == "transient" and "nothing sent" in outcome.detail


async def test_an_order_past_its_deadline_is_not_sent(server, adapter):
    outcome = await adapter.perform(order(http_tool(server.url), KEY, seconds=-1))
    assert outcome.status == "transient" and "nothing sent" in outcome.detail
    assert server.seen == []
