"""The MCP gateway in the test's process, in front of a pipeline stage, and the official MCP
SDK's client to call it with: static tokens and an issuer's JWTs for two callers, and the
client side of the 2026-07-28 tasks extension (the SDK has none; built on its ``ResultClaim``
hook, as the SDK's own examples do)."""

from __future__ import annotations

import asyncio
import hashlib
import json
import secrets
import socket
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, Literal

import httpx2
import mcp_types as types
from joserfc import jwt
from pydantic import ConfigDict
from joserfc.jwk import ECKey
from mcp import Client
from mcp.client.extension import ClaimContext, ClientExtension, NotificationBinding, ResultClaim
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from services.mcp_gateway.main import run_mcp_gateway
from services.mcp_gateway.settings import OPERATION_KEY_META, GatewaySettings
from services.mcp_gateway.tasks import CANCEL_META, EXTENSION
from shared.config import Settings
from tests.support.dispatch import Stage
from tests.support.agents import policy
from tests.support.identities import fresh_principal, local

ISSUER = "https://issuer.test"


@dataclass
class Gateway:
    url: str
    payer: str
    stocker: str
    tokens: dict[str, str]
    issuer_key: ECKey

    def jwt(self, subject: str, audience: str | None = None, client_id: str = "desktop") -> str:
        """The issuer's token for ``subject`` through the OAuth client ``client_id``."""
        claims = {"iss": ISSUER, "aud": audience or self.url, "sub": subject, "tenant": "acme",
                  "client_id": client_id, "exp": int(time.time()) + 300}
        return jwt.encode({"alg": "ES256", "kid": "issuer-1"}, claims, self.issuer_key)


@asynccontextmanager
async def running_gateway(stage: Stage, *, wait_s: float = 20,
                          agents_from_client_ids: bool = False) -> AsyncIterator[Gateway]:
    """The gateway on ``stage``'s topics; ``agents_from_client_ids``: ``GatewaySettings``'."""
    payer, stocker = fresh_principal(), fresh_principal()
    stage.write_policy(policy(payer, stocker))
    tokens = {who: secrets.token_urlsafe(24) for who in (payer, stocker)}
    (stage.folder / "tokens.json").write_text(json.dumps(
        {hashlib.sha256(token.encode()).hexdigest(): f"{who}@acme" for who, token in tokens.items()}))
    issuer_key = ECKey.generate_key("P-256", {"kid": "issuer-1"})
    (stage.folder / "issuer.jwks").write_text(json.dumps(
        {"keys": [issuer_key.as_dict(private=False)]}))
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}/mcp"
    settings = GatewaySettings(
        port=port, resource_url=url, issuer_url=ISSUER, jwks_file=stage.folder / "issuer.jwks",
        tokens_file=stage.folder / "tokens.json", principals_file=local().principals_file,
        tools_file=stage.tools_file, policy_file=stage.policy_file,
        signing_key_file=local().key_file("mcp-gateway"), proposals_topic=stage.proposals,
        approvals_topic=stage.approvals,
        results_family=stage.results, wait_s=wait_s,
        agents_from_client_ids=agents_from_client_ids)
    stopping, started = asyncio.Event(), asyncio.get_running_loop().create_future()
    served = asyncio.create_task(run_mcp_gateway(
        Settings(kafka_bootstrap=stage.endpoints.kafka_bootstrap,
                 database_url=stage.endpoints.database_url), settings, stopping, started))
    await asyncio.wait_for(asyncio.shield(started), 30)
    try:
        yield Gateway(url, payer, stocker, tokens, issuer_key)
    finally:
        stopping.set()
        await served


@asynccontextmanager
async def mcp(gateway: Gateway, token: str, **options: Any) -> AsyncIterator[Client]:
    """The SDK's client on streamable HTTP with ``token``; ``options``: ``Client``'s."""
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"},
                              timeout=httpx2.Timeout(30, read=120))
    async with http, Client(streamable_http_client(gateway.url, http_client=http),
                            **options) as client:
        yield client


def key_meta(key: str) -> dict:
    return {OPERATION_KEY_META: key}


class CreatedTask(types.Result):
    result_type: Literal["task"] = "task"
    task_id: str
    status: str
    created_at: str
    last_updated_at: str
    ttl_ms: int | None = None
    poll_interval_ms: int | None = None
    status_message: str | None = None


class PolledTask(types.Result):
    task_id: str
    status: str
    status_message: str | None = None
    poll_interval_ms: int | None = None
    result: dict[str, Any] | None = None


async def poll(session, task_id: str) -> PolledTask:
    return await session.send_request(
        types.GetTaskRequest(params=types.GetTaskRequestParams(task_id=task_id)), PolledTask)


class Acknowledged(types.Result):
    result_type: str


async def cancel(session, task_id: str) -> dict[str, Any]:
    """``tasks/cancel``: the acknowledgement's account of what came of it (``_meta``)."""
    acknowledged = await session.send_request(
        types.CancelTaskRequest(params=types.CancelTaskRequestParams(task_id=task_id)),
        Acknowledged)
    assert acknowledged.result_type == "complete", acknowledged
    return (acknowledged.meta or {})[CANCEL_META]


async def cancel_unknown(session, task: str) -> bool:
    """Whether ``tasks/cancel`` of ``task`` is refused as an unknown task."""
    try:
        await cancel(session, task)
    except MCPError as refused:
        return refused.message == "unknown task"
    return False


async def until_done(session, task_id: str, timeout: float = 90) -> types.CallToolResult:
    async with asyncio.timeout(timeout):
        while (polled := await poll(session, task_id)).status == "working":
            assert polled.task_id == task_id, "a task polled under another id than its own"
            await asyncio.sleep((polled.poll_interval_ms or 500) / 1000)
    assert polled.status == "completed" and polled.task_id == task_id, polled
    return types.CallToolResult.model_validate(polled.result, by_name=False)


class TaskStatus(types.NotificationParams):
    """A ``notifications/tasks`` frame: the ``DetailedTask``, as ``tasks/get`` answers it."""

    model_config = ConfigDict(extra="allow")
    task_id: str
    status: str
    status_message: str | None = None
    result: dict[str, Any] | None = None


class Tasks(ClientExtension):
    """The client's side of the tasks extension: a task result is polled to its end; the
    status notifications of a ``subscriptions/listen`` stream go to ``notified``."""

    identifier = EXTENSION

    def __init__(self, notified: Callable[[TaskStatus], None] | None = None) -> None:
        self._notified = notified

    def claims(self) -> list[ResultClaim]:
        async def resolve(created: CreatedTask, context: ClaimContext) -> types.CallToolResult:
            return await until_done(context.session, created.task_id)
        return [ResultClaim(result_type="task", model=CreatedTask, resolve=resolve)]

    def notifications(self) -> list[NotificationBinding]:
        if self._notified is None:
            return []

        async def notified(status: TaskStatus) -> None:
            self._notified(status)
        return [NotificationBinding(method="notifications/tasks", params_type=TaskStatus,
                                    handler=notified)]


async def listen(session, task_ids: list[str]) -> types.SubscriptionsListenResult:
    """A ``subscriptions/listen`` for the status of ``task_ids``; answered when it ends."""
    return await session.send_request(types.SubscriptionsListenRequest(
        params=types.SubscriptionsListenRequestParams(
            notifications=types.SubscriptionFilter(taskIds=task_ids))),
        types.SubscriptionsListenResult)
