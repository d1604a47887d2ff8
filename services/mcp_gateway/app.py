"""The gateway's HTTP face: streamable HTTP at ``/mcp`` behind bearer auth, and the RFC 9728
protected-resource metadata that tells a client where to get a token for it.

No token, a bad one, or one for another audience: 401 with ``WWW-Authenticate`` naming the
metadata URL (the MCP authorization flow starts there). Stateless JSON responses: any replica
answers any request, and no session outlives its request. Host headers are checked against the
configured list (DNS rebinding), so a browser page cannot reach a gateway on localhost.
"""

from __future__ import annotations

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

PATH = "/mcp"


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
