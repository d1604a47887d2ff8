"""The HTTP adapter: one attempt of an effect or a status lookup against a tool's HTTP API.

``send`` is ``POST {http_url}/effects`` with the operation key as ``Idempotency-Key``;
``lookup`` is ``GET {http_url}/effects/{operation_key}``; both carry the run, fence, attempt
and intent as ``Intentledger-*`` headers (the reference server is
``downstreams/wallet/http_api.py``). The attempt's timeout is the time left until
``order.deadline_at``.

No retries happen here of any kind: the dispatcher is the only retry owner (docs/design.md §5.6).
aiohttp never resends a POST, but it does resend an idempotent request (our GET) once after a
dropped connection (RFC 9112 §9.3.1), which ``_send_once`` stops; redirects are not followed.

What each observation means (``orders.py`` defines the statuses):

====================================================  =========================================
observation                                           outcome
====================================================  =========================================
no time left before ``deadline_at``                   transient, nothing sent
refused, DNS failure, timeout before connecting       transient: never connected, nothing sent
timeout, reset or disconnect once connected           unknown
2xx carrying a receipt ``applied`` for our key        applied (result, receipt_id, replayed)
2xx with a body over the size limit                   applied, result None (it did happen)
2xx with anything else                                unknown
404 + a ``not_found`` receipt for our key (lookup)    not_found
409 + a ``stale`` receipt for our key                 stale
422 + a ``rejected`` receipt for our key              rejected, the receipt's reason
408, 429                                              transient: the server says it did not act
any other 4xx (no receipt: a gateway, a router)       refused, reason ``http_<code>``
5xx                                                   transient if the tool's
                                                      ``retry.server_errors`` is ``not_applied``,
                                                      else unknown
a non-2xx body over the size limit; 1xx, 3xx          unknown
====================================================  =========================================

The size limit is the tool's ``result_max_bytes`` plus 4096 bytes for the receipt around it;
a larger body is not read (docs/design.md §5.9).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

import aiohttp
from pydantic import ValidationError
from yarl import URL

from services.dispatcher.adapters.orders import Order, Outcome
from shared.contracts.effect_requests import EffectReceipt
from shared.tracing import current_traceparent

RECEIPT_ROOM_BYTES = 4096
NOT_PROCESSED = frozenset({408, 429})
"""4xx codes that say the server did not act and asks to be tried again later."""


@dataclass
class _Attempt:
    """Per request, filled in by the trace hooks: once connected, the request may have landed."""

    connected: bool = False


class HttpEffectAdapter:
    """One per dispatcher process: its session pools connections to every HTTP tool. Safe to
    share between concurrent ``perform`` calls; ``close`` it on shutdown."""

    def __init__(self) -> None:
        self._session: aiohttp.ClientSession | None = None

    async def perform(self, order: Order) -> Outcome:
        seconds = (order.deadline_at - datetime.now(UTC)).total_seconds()
        if seconds <= 0:
            return Outcome("transient", "no time left before the attempt deadline; nothing sent")
        attempt = _Attempt()
        try:
            async with self._client().request(
                    "POST" if order.kind == "send" else "GET", _url(order), headers=_headers(order),
                    json=_body(order) if order.kind == "send" else None, allow_redirects=False,
                    timeout=aiohttp.ClientTimeout(total=seconds), trace_request_ctx=attempt,
                    middlewares=(_send_once(),)) as response:
                body = await _read_capped(response, order.tool.result_max_bytes + RECEIPT_ROOM_BYTES)
                return classify(order, response.status, body,
                                replayed=response.headers.get("Idempotent-Replayed") == "true")
        except TimeoutError:
            return _lost(attempt, f"timeout after {seconds:.1f} s")
        except aiohttp.ServerDisconnectedError:
            return _lost(attempt, "server disconnected")
        except (aiohttp.ClientError, OSError) as error:
            return _lost(attempt, f"{type(error).__name__}: {error}")

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    def _client(self) -> aiohttp.ClientSession:
        """One session for the adapter's life (its connection pool), made inside the loop."""
        if self._session is None:
            connected = aiohttp.TraceConfig()
            connected.on_connection_create_end.append(_mark_connected)
            connected.on_connection_reuseconn.append(_mark_connected)
            self._session = aiohttp.ClientSession(trace_configs=[connected])
        return self._session


def classify(order: Order, status: int, body: bytes | None, *, replayed: bool) -> Outcome:
    """What an HTTP answer means for the order; ``body`` is None when over the size limit."""
    detail = f"HTTP {status}"
    if 200 <= status < 300:
        if body is None:
            return Outcome("applied", f"{detail}; response over size limit, result not read",
                           replayed=replayed)
        receipt = _receipt(body)
        if receipt is None or receipt.status != "applied" or receipt.operation_key != order.operation_key:
            return Outcome("unknown", f"{detail} without an applied receipt for this key")
        return Outcome("applied", detail, result=receipt.result, replayed=receipt.replayed,
                       receipt_id=_receipt_id(receipt),
                       settled_by_attempt=receipt.settled_by_attempt)
    if body is None:
        return Outcome("unknown", f"{detail}; response over size limit")
    receipt = _receipt(body)
    if receipt is not None and receipt.operation_key != order.operation_key:
        receipt = None
    answered = {404: "not_found", 409: "stale", 422: "rejected"}.get(status)
    if answered and receipt is not None and receipt.status == answered and (
            answered != "not_found" or order.kind == "lookup"):
        return Outcome(answered, detail, reason=receipt.reason, replayed=receipt.replayed,
                       receipt_id=_receipt_id(receipt))
    if status in NOT_PROCESSED:
        return Outcome("transient", detail)
    if 400 <= status < 500:
        # A proxy, an auth gateway or a router can answer 4xx too: without the downstream's
        # receipt this proves only that this request was refused, not what the key came to.
        return Outcome("refused", f"{detail} without the downstream's receipt",
                       reason=f"http_{status}")
    if status >= 500 and order.tool.retry.server_errors == "not_applied":
        return Outcome("transient", f"{detail}; the tool declares 5xx not applied")
    return Outcome("unknown", detail)


def _lost(attempt: _Attempt, detail: str) -> Outcome:
    if attempt.connected:
        return Outcome("unknown", detail)
    return Outcome("transient", f"{detail}; never connected, nothing sent")


def _send_once() -> Any:
    """A client middleware: a second send of one request re-raises the first one's failure."""
    failure: Exception | None = None

    async def middleware(request: aiohttp.ClientRequest, handler: Any) -> aiohttp.ClientResponse:
        nonlocal failure
        if failure is not None:
            raise failure
        try:
            return await handler(request)
        except Exception as error:
            failure = error
            raise

    return middleware


async def _mark_connected(session: aiohttp.ClientSession, context: Any, params: Any) -> None:
    context.trace_request_ctx.connected = True


async def _read_capped(response: aiohttp.ClientResponse, limit: int) -> bytes | None:
    body = bytearray()
    async for chunk in response.content.iter_any():
        body += chunk
        if len(body) > limit:
            return None
    return bytes(body)


def _receipt(body: bytes) -> EffectReceipt | None:
    try:
        return EffectReceipt.model_validate_json(body)
    except ValidationError:
        return None


def _receipt_id(receipt: EffectReceipt) -> str | None:
    return str(receipt.receipt_id) if receipt.receipt_id else None


def _url(order: Order) -> URL:
    effects = URL(order.tool.http_url.rstrip("/") + "/effects")
    if order.kind == "send":
        return effects
    return URL(f"{effects}/{quote(order.operation_key, safe='')}", encoded=True)  # "/" stays in the key


def _headers(order: Order) -> dict[str, str]:
    headers = {"Cache-Control": "no-store",  # an answer about a key is never a cached one
               **({"traceparent": traceparent} if (traceparent := current_traceparent()) else {}),
               "Intentledger-Run-Id": order.run_id, "Intentledger-Tenant": order.tenant_id,
               "Intentledger-Fence": str(order.fence),
               "Intentledger-Attempt": str(order.attempt),
               "Intentledger-Logical-Call-Id": str(order.logical_call_id)}
    if order.kind == "send":
        headers |= {"Idempotency-Key": order.operation_key,
                    "Intentledger-Deadline": order.deadline_at.isoformat()}
    return headers


def _body(order: Order) -> dict[str, Any]:
    return {"tool_name": order.tool.name, "tool_version": order.tool.version,
            "canonical_arguments": order.canonical_arguments,
            **({"capability": order.capability} if order.capability is not None else {})}
