"""One ledger client per caller, each proposing as its caller and signing with the gateway's key.

A ``Client`` is one principal acting for one tenant and reads only that tenant's answers, so the
gateway keeps one per caller (agent, tenant, person) it serves, opened on first use. Callers
come and go (each person behind an agent is one), and each client holds Kafka connections and a
reader per partition: so a client no call has used for ``idle_s`` is closed, and beyond
``max_open`` clients the least recently used idle ones are closed first. A client is never
closed under a call using it (``using``); a caller whose client was closed gets a new one.

Its records are signed by the gateway (principal ``mcp-gateway``, role ``proposes-for-others``),
naming the caller in the signature's ``agent`` claim and the person behind it, if any, in
``person``: the intake accepts the calls as the caller's and records who signed for whom
(``shared.identity.delegation``).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import OrderedDict
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from intentledger_client import Client
from intentledger_client.signing import PROPOSAL, WITHDRAWAL, SigningKey, sign

from services.mcp_gateway.callers import Caller

SIGNED_FOR_CALLERS = (PROPOSAL, WITHDRAWAL)
"""What the gateway signs in a caller's name: its calls, and their withdrawals."""


def delegated(bootstrap: str, caller: Caller, *, gateway_id: str, key: SigningKey,
              **options: Any) -> Client:
    """A client whose records the gateway signs as itself, naming ``caller`` (the agent, and
    the person when known) in the signature's claims: the intake checks the delegation."""
    def signer(value: bytes, use: str) -> str:
        if use not in SIGNED_FOR_CALLERS:
            raise ValueError(f"the gateway signs nothing for its callers as a {use}")
        return sign(value, key, principal_id=gateway_id, tenant_id=caller.tenant_id,
                    use=use, agent=caller.principal_id, person=caller.person_id)

    return Client(bootstrap, principal_id=caller.principal_id, tenant_id=caller.tenant_id,
                  signer=signer, **options)


@dataclass
class _Opened:
    client: asyncio.Task[Client]
    users: int = 0
    last_used: float = field(default_factory=lambda: asyncio.get_running_loop().time())


class Clients:
    def __init__(self, bootstrap: str, *, gateway_id: str, key: SigningKey,
                 options: Mapping[str, Any], idle_s: float, max_open: int) -> None:
        self._bootstrap, self._gateway_id, self._key = bootstrap, gateway_id, key
        self._options = dict(options)
        self._idle_s, self._max_open = idle_s, max_open
        self._opened: OrderedDict[Caller, _Opened] = OrderedDict()  # least recently used first
        self._closing: set[asyncio.Task[None]] = set()
        self._sweeper: asyncio.Task[None] | None = None

    @property
    def open(self) -> int:
        return len(self._opened)

    @contextlib.asynccontextmanager
    async def using(self, caller: Caller) -> AsyncIterator[Client]:
        """The caller's client, opened once (again, if it failed to open or was closed), kept
        open while the block runs."""
        opened = self._opened.get(caller)
        if opened is None or _failed(opened.client):
            opened = self._opened[caller] = _Opened(asyncio.ensure_future(self._open(caller)))
        self._opened.move_to_end(caller)
        opened.users += 1
        try:
            yield await asyncio.shield(opened.client)
        finally:
            opened.users -= 1
            opened.last_used = asyncio.get_running_loop().time()
            self._start_sweeping()
            self.sweep()

    def sweep(self) -> None:
        """Close the clients idle for ``idle_s``, and the least recently used idle ones beyond
        ``max_open``."""
        now = asyncio.get_running_loop().time()
        idle = [caller for caller, opened in self._opened.items() if opened.users == 0]
        excess = len(self._opened) - self._max_open
        for caller in idle:
            if excess > 0 or now - self._opened[caller].last_used >= self._idle_s:
                self._close(self._opened.pop(caller))
                excess -= 1

    def _start_sweeping(self) -> None:
        if self._sweeper is None or self._sweeper.done():
            self._sweeper = asyncio.create_task(self._sweep_while_open())

    async def _sweep_while_open(self) -> None:
        while self._opened:
            await asyncio.sleep(self._idle_s / 2)
            self.sweep()

    def _close(self, opened: _Opened) -> None:
        task = asyncio.ensure_future(_closed(opened.client))
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

    async def _open(self, caller: Caller) -> Client:
        client = delegated(self._bootstrap, caller, gateway_id=self._gateway_id,
                           key=self._key, **self._options)
        await client.start()
        return client

    async def close(self) -> None:
        if self._sweeper is not None:
            self._sweeper.cancel()
        while self._opened:
            self._close(self._opened.popitem()[1])
        await asyncio.gather(*self._closing, return_exceptions=True)


def _failed(client: asyncio.Task[Client]) -> bool:
    return client.done() and (client.cancelled() or client.exception() is not None)


async def _closed(client: asyncio.Task[Client]) -> None:
    if not client.done():
        client.cancel()
    elif not _failed(client):
        await client.result().close()
