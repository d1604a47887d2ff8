"""Composition root of the MCP gateway: files, token verifier, ledger clients and the MCP server,
served over streamable HTTP until ``stopping`` is set, or over stdio for one local caller.
Nothing connects before it runs; the ledger clients open per caller on first use. Ready once
it serves."""

from __future__ import annotations

import asyncio
import logging

from intentledger_client.signing import resolve_signing_key
from mcp.server import Server
from mcp.server.stdio import stdio_server

from services.mcp_gateway.app import serve_http
from services.mcp_gateway.callers import Caller, caller_of
from services.mcp_gateway.calls import Calls
from services.mcp_gateway.clients import Clients
from services.mcp_gateway.server import mcp_server
from services.mcp_gateway.settings import GatewaySettings
from services.mcp_gateway.tokens import GatewayTokenVerifier, load_key_set, load_static_tokens
from shared.config import Settings
from shared.health import Health
from shared.identity.principals import Principals, PrincipalsWatcher
from shared.messaging.kafka_security import configured
from shared.policy.watcher import PolicyWatcher
from shared.runtime import service_runtime
from shared.signals import stop_on_signals
from shared.tools import load_registry

log = logging.getLogger(__name__)


async def run_mcp_gateway(settings: Settings, gateway_settings: GatewaySettings | None = None,
                          stopping: asyncio.Event | None = None,
                          started: asyncio.Future[int] | None = None) -> None:
    """Serve until ``stopping`` is set (or stdin ends, on stdio); ``started`` receives the
    bound port (tests ask for 0)."""
    gateway = gateway_settings or GatewaySettings()
    stopping = stopping or stop_on_signals()
    health = Health("mcp-gateway", "serving")
    async with service_runtime(health, settings, gateway, configured(), database=False):
        key = resolve_signing_key(gateway.signing_key_file)
        if key is None:
            raise SystemExit("mcp-gateway: no signing key (INTENTLEDGER_MCP_GATEWAY_"
                             "SIGNING_KEY_FILE or INTENTLEDGER_SIGNING_KEY_FILE)")
        principals, policy = PrincipalsWatcher(gateway.principals_file), PolicyWatcher(
            gateway.policy_file)
        local = _stdio_caller(gateway.stdio_caller, principals.current)
        clients = Clients(settings.kafka_endpoint, gateway_id=gateway.principal_id,
                          key=key, options={"results_family": gateway.results_family,
                                            "proposals_topic": gateway.proposals_topic,
                                            "approvals_topic": gateway.approvals_topic,
                                            "kafka_options": configured().client_kwargs()},
                          idle_s=gateway.client_idle_s, max_open=gateway.max_clients)
        calls = Calls(clients, gateway.wait_s)
        server = mcp_server(load_registry(gateway.tools_file), lambda: policy.current, calls,
                            local)
        watchers = [asyncio.create_task(principals.watch()), asyncio.create_task(policy.watch())]
        try:
            if local is not None:
                await _serve_stdio(server, health, stopping)
            else:
                verifier = GatewayTokenVerifier(
                    resource_url=gateway.resource_url, principals=lambda: principals.current,
                    issuer=gateway.issuer_url, keys=load_key_set(gateway.jwks_file),
                    static=load_static_tokens(gateway.tokens_file),
                    static_scopes=gateway.required_scopes,
                    agents_from_client_ids=gateway.agents_from_client_ids)
                await serve_http(server, verifier, gateway, health, stopping, started)
        finally:
            for watcher in watchers:
                watcher.cancel()
            await calls.close()
            await clients.close()


def _stdio_caller(configured_caller: str | None, principals: Principals) -> Caller | None:
    if configured_caller is None:
        return None
    principal, _, tenant = configured_caller.partition("@")
    caller = caller_of(principal, {"tenant": tenant} if tenant else {}, principals)
    if caller is None:
        raise SystemExit(f"mcp-gateway: {configured_caller!r} is no listed principal of one tenant")
    return caller


async def _serve_stdio(server: Server, health: Health, stopping: asyncio.Event) -> None:
    """One local client, which started this process: no bearer token, the caller configured."""
    async def serving() -> None:
        async with stdio_server() as (read, write):
            health.ready_when("serving", _always)
            await server.run(read, write, server.create_initialization_options())

    run = asyncio.create_task(serving())
    await asyncio.wait([run, asyncio.create_task(stopping.wait())],
                       return_when=asyncio.FIRST_COMPLETED)
    run.cancel()
    await asyncio.gather(run, return_exceptions=True)


async def _always() -> None:
    return None
