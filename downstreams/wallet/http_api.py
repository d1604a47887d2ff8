"""The wallet over HTTP, for the dispatcher's HTTP adapter: the same answers as the Kafka path
(``answers.py``), each in one PostgreSQL transaction.

``POST /effects`` performs an effect. Headers: ``Idempotency-Key`` (the operation key),
``Intentledger-Run-Id`` and ``Intentledger-Tenant`` (the run the fence is of: runs are named by
tenant and run id), ``Intentledger-Fence``, ``Intentledger-Attempt``,
``Intentledger-Logical-Call-Id``, ``Intentledger-Deadline`` (RFC 3339, with an offset).
Body: ``{"tool_name", "tool_version", "canonical_arguments", "capability"}`` (the policy's
signed capability, checked as on Kafka).

``GET /effects/{operation_key}`` is the status lookup by key (headers as above, without
``Idempotency-Key`` and ``Intentledger-Deadline``). It raises the run's fence like a request.

Both answer with an ``EffectReceipt``: 200 applied, 422 rejected (a recorded refusal, a key
reused with other arguments, a passed deadline, ...), 409 stale, 404 not_found (lookup only);
``Idempotent-Replayed: true`` marks an answer recorded earlier (the effect was not repeated).
A malformed request (missing header, bad JSON, bad fence, ...) gets 400 ``{"error": ...}``;
anything unexpected a 500: the caller cannot tell whether it took effect and must look up.
``GET /healthz`` is 200 when PostgreSQL answers, else 503. ``/audit/effects`` is the audit API
(``audit_api.py``).

Fault points (``shared.faults``), besides ``wallet.delay`` and ``wallet.refuse`` of
``answers.py``: ``wallet.http.fail`` (``drop``) answers 503 before touching the database, so
nothing is applied; ``wallet.http.after_commit_drop_response`` (``drop``) commits a POST's
answer, then aborts the connection without a response: the caller sees a disconnect, an
unknown outcome (docs/design.md §1), and a lookup finds the answer.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, TypeVar

import asyncpg
from aiohttp import web
from pydantic import BaseModel, ValidationError

from downstreams.wallet import audit_api
from downstreams.wallet.answers import Lookup, answer, answer_lookup
from downstreams.wallet.book import SqlBook
from downstreams.wallet.http_refusals import explained, malformed
from shared import faults
from shared.downstream.capability_check import CapabilityCheck
from shared.contracts.effect_requests import EffectReceipt, EffectRequested
from shared.tracing import continuing

log = logging.getLogger(__name__)
POOL = web.AppKey("pool", asyncpg.Pool)
CHECK = web.AppKey("capability_check", CapabilityCheck)
HTTP_STATUS = {"applied": 200, "rejected": 422, "stale": 409, "not_found": 404}
CALL_HEADERS = {"run_id": "Intentledger-Run-Id", "tenant_id": "Intentledger-Tenant",
                "fence": "Intentledger-Fence",
                "attempt": "Intentledger-Attempt", "logical_call_id": "Intentledger-Logical-Call-Id"}
SEND_HEADERS = {"operation_key": "Idempotency-Key", **CALL_HEADERS,
                "deadline_at": "Intentledger-Deadline"}
BODY_FIELDS = {"tool_name", "tool_version", "canonical_arguments", "capability"}
M = TypeVar("M", bound=BaseModel)
SHUTDOWN_S = 10.0
"""How long requests in flight may take to finish on stop (within Kubernetes' 30 s grace)."""


@asynccontextmanager
async def serving(pool: asyncpg.Pool, check: CapabilityCheck, host: str,
                  port: int) -> AsyncIterator[None]:
    """Listen while inside; on leaving, stop accepting and let requests in flight finish
    (their transactions commit or roll back whole) before the pool closes."""
    runner = web.AppRunner(create_app(pool, check), access_log=None, shutdown_timeout=SHUTDOWN_S)
    await runner.setup()
    try:
        await web.TCPSite(runner, host, port).start()
        log.info("wallet HTTP API on http://%s:%d", host, port)
        yield
    finally:
        await runner.cleanup()


@web.middleware
async def _traced(request: web.Request, handler) -> web.StreamResponse:
    """Each request continues the caller's trace (its ``traceparent`` header)."""
    with continuing(request.headers.get("traceparent"), f"{request.method} {request.path}"):
        return await handler(request)


def create_app(pool: asyncpg.Pool, check: CapabilityCheck) -> web.Application:
    app = web.Application(middlewares=[_traced])
    app[POOL] = pool
    app[CHECK] = check
    app.router.add_post("/effects", post_effect)
    app.router.add_get("/effects/{operation_key}", get_effect)
    app.router.add_get("/healthz", healthz)
    audit_api.add_routes(app, POOL)
    return app


async def post_effect(request: web.Request) -> web.StreamResponse:
    await _injected_failure()
    fields = _headers(request, SEND_HEADERS)
    run_id = _run_id(fields.pop("run_id"))
    effect = _valid(EffectRequested, await _body(request) | fields, SEND_HEADERS)
    async with request.app[POOL].acquire() as conn, conn.transaction():
        receipt = await answer(SqlBook(conn), run_id, effect, request.app[CHECK])
    try:
        await faults.hit("wallet.http.after_commit_drop_response")
    except faults.ResponseDropped:
        log.warning("fault: %s answered %s, connection dropped", effect.operation_key, receipt.status)
        if request.transport is not None:
            request.transport.abort()  # the response below goes nowhere
    return _answered(receipt)


async def get_effect(request: web.Request) -> web.StreamResponse:
    await _injected_failure()
    fields = _headers(request, CALL_HEADERS) | {"operation_key": request.match_info["operation_key"]}
    lookup = _valid(Lookup, fields, CALL_HEADERS)
    async with request.app[POOL].acquire() as conn, conn.transaction():
        return _answered(await answer_lookup(SqlBook(conn), lookup))


async def healthz(request: web.Request) -> web.StreamResponse:
    try:
        await request.app[POOL].fetchval("SELECT 1", timeout=5)
    except (OSError, TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError) as error:
        return web.json_response({"status": "unavailable", "error": str(error)}, status=503)
    return web.json_response({"status": "ok"})


def _answered(receipt: EffectReceipt) -> web.Response:
    return web.json_response(receipt.model_dump(mode="json"), status=HTTP_STATUS[receipt.status],
                             headers={"Idempotent-Replayed": "true"} if receipt.replayed else None)


async def _injected_failure() -> None:
    try:
        await faults.hit("wallet.http.fail")
    except faults.ResponseDropped:
        raise web.HTTPServiceUnavailable(text=json.dumps({"error": "injected: wallet.http.fail"}),
                                         content_type="application/json") from None


def _headers(request: web.Request, names: dict[str, str]) -> dict[str, str]:
    missing = [header for header in names.values() if header not in request.headers]
    if missing:
        raise malformed(f"missing header {', '.join(missing)}")
    return {field: request.headers[header] for field, header in names.items()}


async def _body(request: web.Request) -> dict[str, Any]:
    try:
        body = json.loads(await request.text(), parse_constant=_no_constant)
    except (ValueError, RecursionError):
        raise malformed("the body is not JSON (nested too deep, or NaN/Infinity)") from None
    if not isinstance(body, dict) or not set(body) <= BODY_FIELDS:
        raise malformed(f"the body must be a JSON object of {', '.join(sorted(BODY_FIELDS))}")
    return body


def _no_constant(name: str) -> None:
    """NaN and Infinity are not JSON; Python's parser accepts them unless told not to."""
    raise ValueError(f"{name} is not a JSON number")


def _run_id(value: str) -> str:
    """The fence's scope: the run whose lease the sender holds."""
    if not 1 <= len(value) <= 200:
        raise malformed(f"{CALL_HEADERS['run_id']}: 1 to 200 characters")
    return value


def _valid(model: type[M], fields: dict[str, Any], headers: dict[str, str]) -> M:
    """The model, or a 400 naming the header (or body field) to fix."""
    try:
        return model.model_validate(fields)
    except ValidationError as error:
        raise malformed(explained(error, headers)) from None
