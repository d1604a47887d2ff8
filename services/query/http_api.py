"""The query API over HTTP: JSON in, JSON out, every data request scoped by its API key.

``Authorization: Bearer <key>``; the key maps to one tenant or to every tenant (operator).
Every error is ``{"error": {"code", "message"}}`` (``models.ErrorBody``). ``/healthz`` and
``/openapi.json`` need no key: they say nothing about any tenant.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from functools import partial
from typing import Any

import asyncpg
from aiohttp import web
from pydantic import TypeAdapter, ValidationError

from services.query.console.web import CONSOLE, PREFIX as CONSOLE_PREFIX, Console, add_console, secured
from services.query.access import Access, access_for, run_tenant, scoped
from services.query.endpoints import ENDPOINTS, Endpoint
from services.query.errors import QueryError, invalid_cursor, not_found, tenant_required
from services.query.openapi import document
from services.query.settings import QuerySettings

log = logging.getLogger(__name__)
POOL = web.AppKey("pool", asyncpg.Pool)
SETTINGS = web.AppKey("settings", QuerySettings)
ACCESS = web.RequestKey("access", Access)
PUBLIC = frozenset({"/healthz", "/openapi.json"})
SHUTDOWN_S = 10.0
"""How long requests in flight may take to finish on stop (within Kubernetes' 30 s grace)."""


@dataclass(frozen=True)
class Ports:
    """Where the process listens (the real ports when 0 asked for any free one)."""

    api: int
    console: int | None
    """The console's port: the API's when it is served beside it; None without a console."""


@asynccontextmanager
async def serving(pool: asyncpg.Pool, settings: QuerySettings,
                  console: Console | None = None) -> AsyncIterator[Ports]:
    """Listen while inside; on leaving, finish requests in flight. The console is served beside
    the API, or on its own port when it has one (then the API's port has no console at all)."""
    apart = console is not None and console.settings.port is not None
    async with AsyncExitStack() as stack:
        api = await stack.enter_async_context(
            _listening(create_app(pool, settings, None if apart else console), settings.host,
                       settings.port, "query API"))
        beside = api if console is not None else None
        if apart:
            beside = await stack.enter_async_context(
                _listening(create_app(pool, settings, console), settings.host,
                           console.settings.port, "console"))
        yield Ports(api, beside)


@asynccontextmanager
async def _listening(app: web.Application, host: str, port: int, what: str) -> AsyncIterator[int]:
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=SHUTDOWN_S)
    await runner.setup()
    try:
        await web.TCPSite(runner, host, port).start()
        bound = runner.addresses[0][1]
        log.info("%s on http://%s:%d", what, host, bound)
        yield bound
    finally:
        await runner.cleanup()


def create_app(pool: asyncpg.Pool, settings: QuerySettings,
               console: Console | None = None) -> web.Application:
    app = web.Application(middlewares=[secured, errors_as_json, authenticated])
    app[POOL], app[SETTINGS] = pool, settings
    if console is not None:
        add_console(app, console)
    for endpoint in ENDPOINTS:
        app.router.add_get(endpoint.path, partial(answer, endpoint), allow_head=False)
    app.router.add_get("/openapi.json", openapi, allow_head=False)
    app.router.add_get("/healthz", healthz, allow_head=False)
    return app


async def answer(endpoint: Endpoint, request: web.Request) -> web.Response:
    access: Access = request[ACCESS]
    if endpoint.operator_only and not access.operator:
        raise QueryError(403, "operator_only", f"{endpoint.path} needs an operator key")
    filters = _filters(endpoint, request) if endpoint.filters else None
    path = {name: _valid(kind, request.match_info[name], name)
            for name, kind in endpoint.path_parameters.items()}
    scope = {}
    if endpoint.run_scoped:
        if access.operator and not filters.tenant:
            raise tenant_required()
        if (tenant := run_tenant(access, filters.tenant)) is None:
            raise not_found(" ".join(f"{name} {value}" for name, value in path.items()))
        scope["tenant"] = tenant
    app = request.app
    async with scoped(app[POOL], access, statement_timeout_ms=app[SETTINGS].statement_timeout_ms) as conn:
        found = await endpoint.read(conn, filters, **path, **scope)
    if found is None:
        raise not_found(" ".join(f"{name} {value}" for name, value in path.items()))
    return web.json_response(text=found.model_dump_json())


async def openapi(request: web.Request) -> web.Response:
    return web.json_response(document())


async def healthz(request: web.Request) -> web.Response:
    try:
        await request.app[POOL].fetchval("SELECT 1", timeout=5)
    except (OSError, TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError) as error:
        raise QueryError(503, "unavailable", f"PostgreSQL: {error}") from None
    return web.json_response({"status": "ok"})


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@web.middleware
async def authenticated(request: web.Request, handler: Handler) -> web.StreamResponse:
    """A data request needs a bearer key, or the console's session (``/console`` routes
    check that themselves); either way it gets one tenant's access, or an operator's."""
    console_route = request.path == CONSOLE_PREFIX or request.path.startswith(f"{CONSOLE_PREFIX}/")
    if request.path not in PUBLIC and not console_route and request.match_info.http_exception is None:
        request[ACCESS] = _access(request)
    return await handler(request)


def _access(request: web.Request) -> Access:
    header = request.headers.get("Authorization")
    if header is not None:
        scheme, _, key = header.partition(" ")
        access = access_for(key.strip(), request.app[SETTINGS].api_keys) if scheme == "Bearer" else None
    else:
        console = request.app.get(CONSOLE)
        viewer = console.viewer(request) if console is not None else None
        access = viewer.access if viewer is not None else None
    if access is None:
        raise QueryError(401, "unauthenticated", "send `Authorization: Bearer <API key>`")
    return access


@web.middleware
async def errors_as_json(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except QueryError as error:
        return _error(error.status, error.code, error.message)
    except asyncpg.DataError:  # only cursor values reach SQL as text to be cast
        error = invalid_cursor()
        return _error(error.status, error.code, error.message)
    except web.HTTPException as error:
        code = {404: "not_found", 405: "method_not_allowed"}.get(error.status, "http_error")
        return _error(error.status, code, error.reason)
    except Exception:
        log.exception("query API: %s %s failed", request.method, request.path)
        return _error(500, "internal", "unexpected error; see the service's log")


def _filters(endpoint: Endpoint, request: web.Request) -> Any:
    model = endpoint.filters
    fields: dict[str, Any] = {}
    for name in request.query:
        info = model.model_fields.get(name)
        repeated = info is not None and getattr(info.annotation, "__origin__", None) is list
        fields[name] = request.query.getall(name) if repeated else request.query[name]
    try:
        return model.model_validate(fields)
    except ValidationError as error:
        raise _invalid(error) from None


def _valid(kind: type, value: str, name: str) -> Any:
    try:
        return TypeAdapter(kind).validate_python(value)
    except ValidationError as error:
        raise _invalid(error, name) from None


def _invalid(error: ValidationError, prefix: str | None = None) -> QueryError:
    message = "; ".join(f"{'.'.join(map(str, (prefix, *e['loc']) if prefix else e['loc']))}: {e['msg']}"
                        for e in error.errors())
    return QueryError(400, "invalid_parameter", message)


def _error(status: int, code: str, message: str) -> web.Response:
    return web.json_response({"error": {"code": code, "message": message}}, status=status)
