"""The gateway's HTTP face, served by uvicorn: streamable HTTP at ``/mcp`` behind bearer auth,
and the RFC 9728 protected-resource metadata that tells a client where to get a token for it.

No token, a bad one, or one for another audience: 401 with ``WWW-Authenticate`` naming the
metadata URL (the MCP authorization flow starts there). Stateless JSON responses: any replica
answers any request, and no session outlives its request. Host headers are checked against the
configured list (DNS rebinding), so a browser page cannot reach a gateway on localhost.
"""

from __future__ import annotations

import asyncio
import logging

import uvicorn
from mcp.server import Server
from mcp.server.auth.middleware.auth_context import AuthContextMiddleware
from mcp.server.auth.middleware.bearer_auth import BearerAuthBackend, RequireAuthMiddleware
from mcp.server.auth.provider import TokenVerifier
from mcp.server.auth.routes import build_resource_metadata_url, create_protected_resource_routes
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from pydantic import AnyHttpUrl
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.authentication import AuthenticationMiddleware
from starlette.routing import Route

from services.mcp_gateway.settings import GatewaySettings
from shared.health import Health, NotReady

PATH = "/mcp"
log = logging.getLogger(__name__)


def mcp_app(server: Server, verifier: TokenVerifier, settings: GatewaySettings
            ) -> tuple[Starlette, StreamableHTTPSessionManager]:
    """The ASGI app and its session manager, which the caller runs (``async with .run()``)."""
    sessions = StreamableHTTPSessionManager(
        app=server, json_response=True, stateless=True,
        security_settings=TransportSecuritySettings(
            enable_dns_rebinding_protection=True, allowed_hosts=settings.allowed_hosts,
            allowed_origins=[f"http://{host}" for host in settings.allowed_hosts]
            + [f"https://{host}" for host in settings.allowed_hosts]))
    resource = AnyHttpUrl(settings.resource_url)
    metadata = []  # with static tokens only, there is no authorization server to point to
    if settings.issuer_url:
        metadata = create_protected_resource_routes(
            settings.resource_url,  # a str: AnyHttpUrl would add a trailing slash to the document
            [settings.issuer_url],  # a str too, so the issuer matches exactly
            scopes_supported=settings.required_scopes or None, resource_name="intentledger")
    endpoint = RequireAuthMiddleware(StreamableHTTPASGIApp(sessions), settings.required_scopes,
                                     build_resource_metadata_url(resource) if metadata else None)
    app = Starlette(routes=[Route(PATH, endpoint), *metadata], middleware=[
        Middleware(AuthenticationMiddleware,
                   backend=BearerAuthBackend(verifier, resource_server_url=resource)),
        Middleware(AuthContextMiddleware)])
    return app, sessions


async def serve_http(server: Server, verifier: TokenVerifier, settings: GatewaySettings,
                     health: Health, stopping: asyncio.Event,
                     started: asyncio.Future[int] | None) -> None:
    """Serve until ``stopping`` is set; ``started`` receives the bound port."""
    app, sessions = mcp_app(server, verifier, settings)
    http = uvicorn.Server(uvicorn.Config(app, host=settings.host, port=settings.port,
                                         lifespan="off", log_level="warning"))
    async with sessions.run():
        serving = asyncio.create_task(http.serve())
        while not http.started and not serving.done():
            await asyncio.sleep(0.05)
        if not http.started:
            raise SystemExit("mcp-gateway: the HTTP port could not be bound")
        port = http.servers[0].sockets[0].getsockname()[1]
        health.ready_when("serving", lambda: _answers(http))
        log.info("mcp-gateway serving on %s:%d (resource %s)", settings.host, port,
                 settings.resource_url)
        if started is not None:
            started.set_result(port)
        await asyncio.wait([serving, asyncio.create_task(stopping.wait())],
                           return_when=asyncio.FIRST_COMPLETED)
        http.should_exit = True
        await serving


async def _answers(http: uvicorn.Server) -> None:
    if not http.started or http.should_exit:
        raise NotReady("not serving")
