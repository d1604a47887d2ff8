"""Composition root of the MCP gateway: files, token verifier, ledger clients, the MCP server and
its HTTP app, served by uvicorn until ``stopping`` is set. Nothing connects before it runs; the
ledger clients open per caller on first use. Ready once the HTTP port is bound."""

from __future__ import annotations

import asyncio
import logging

import uvicorn
from intentledger_client.signing import resolve_signing_key

from services.mcp_gateway.app import mcp_app
from services.mcp_gateway.calls import Calls
from services.mcp_gateway.clients import Clients
from services.mcp_gateway.server import mcp_server
from services.mcp_gateway.settings import GatewaySettings
from services.mcp_gateway.tokens import GatewayTokenVerifier, load_key_set, load_static_tokens
from shared.config import Settings
from shared.health import Health, NotReady
from shared.identity.principals import PrincipalsWatcher
from shared.messaging.kafka_security import configured
from shared.policy.watcher import PolicyWatcher
from shared.runtime import service_runtime
from shared.signals import stop_on_signals
from shared.tools import load_registry

log = logging.getLogger(__name__)


async def run_mcp_gateway(settings: Settings, gateway_settings: GatewaySettings | None = None,
                          stopping: asyncio.Event | None = None,
                          started: asyncio.Future[int] | None = None) -> None:
    """Serve until ``stopping`` is set; ``started`` receives the bound port (tests ask for 0)."""
    gateway = gateway_settings or GatewaySettings()
    stopping = stopping or stop_on_signals()
    health = Health("mcp-gateway", "http")
    async with service_runtime(health, settings, gateway, configured(), database=False):
        key = resolve_signing_key(gateway.signing_key_file)
        if key is None:
            raise SystemExit("mcp-gateway: no signing key (INTENTLEDGER_MCP_GATEWAY_"
                             "SIGNING_KEY_FILE or INTENTLEDGER_SIGNING_KEY_FILE)")
        principals, policy = PrincipalsWatcher(gateway.principals_file), PolicyWatcher(
            gateway.policy_file)
        verifier = GatewayTokenVerifier(
            resource_url=gateway.resource_url, principals=lambda: principals.current,
            issuer=gateway.issuer_url, keys=load_key_set(gateway.jwks_file),
            static=load_static_tokens(gateway.tokens_file), static_scopes=gateway.required_scopes)
        clients = Clients(settings.kafka_endpoint, gateway_id=gateway.principal_id,
                          key=key, options={"results_family": gateway.results_family,
                                            "proposals_topic": gateway.proposals_topic,
                                            "kafka_options": configured().client_kwargs()})
        calls = Calls(clients, gateway.wait_s)
        app, sessions = mcp_app(mcp_server(load_registry(gateway.tools_file),
                                           lambda: policy.current, calls), verifier, gateway)
        http = uvicorn.Server(uvicorn.Config(app, host=gateway.host, port=gateway.port,
                                             lifespan="off", log_level="warning"))
        watchers = [asyncio.create_task(principals.watch()), asyncio.create_task(policy.watch())]
        try:
            async with sessions.run():
                serving = asyncio.create_task(http.serve())
                while not http.started and not serving.done():
                    await asyncio.sleep(0.05)
                port = _bound_port(http)
                health.ready_when("http", lambda: _answers(http))
                log.info("mcp-gateway serving on %s:%d (resource %s)", gateway.host, port,
                         gateway.resource_url)
                if started is not None:
                    started.set_result(port)
                await asyncio.wait([serving, asyncio.create_task(stopping.wait())],
                                   return_when=asyncio.FIRST_COMPLETED)
                http.should_exit = True
                await serving
        finally:
            for watcher in watchers:
                watcher.cancel()
            await calls.close()
            await clients.close()


def _bound_port(http: uvicorn.Server) -> int:
    if not http.started:
        raise SystemExit("mcp-gateway: the HTTP port could not be bound")
    return http.servers[0].sockets[0].getsockname()[1]


async def _answers(http: uvicorn.Server) -> None:
    if not http.started or http.should_exit:
        raise NotReady("not serving")
