"""One ledger client per caller, each proposing as its caller and signing with the gateway's key.

A ``Client`` is one principal acting for one tenant and reads only that tenant's answers, so the
gateway keeps one per caller it has served, opened on first use. Its records are signed by the
gateway (principal ``mcp-gateway``, role ``proposes-for-others``), naming the caller in the
signature's ``agent`` claim and the person behind it, if any, in ``person``: the intake accepts
the calls as the caller's and records who signed for whom (``shared.identity.delegation``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from intentledger_client import Client
from intentledger_client.signing import PROPOSAL, SigningKey, sign

from services.mcp_gateway.callers import Caller


def delegated(bootstrap: str, caller: Caller, *, gateway_id: str, key: SigningKey,
              **options: Any) -> Client:
    """A client whose records the gateway signs as itself, naming ``caller`` (the agent, and
    the person when known) in the signature's claims: the intake checks the delegation."""
    def signer(value: bytes) -> str:
        return sign(value, key, principal_id=gateway_id, tenant_id=caller.tenant_id,
                    use=PROPOSAL, agent=caller.principal_id, person=caller.person_id)

    return Client(bootstrap, principal_id=caller.principal_id, tenant_id=caller.tenant_id,
                  signer=signer, **options)


class Clients:
    def __init__(self, bootstrap: str, *, gateway_id: str, key: SigningKey,
                 options: Mapping[str, Any]) -> None:
        self._bootstrap, self._gateway_id, self._key = bootstrap, gateway_id, key
        self._options = dict(options)
        self._opened: dict[Caller, asyncio.Task[Client]] = {}

    async def of(self, caller: Caller) -> Client:
        """The caller's client, opened once; one that failed to open is opened again."""
        opened = self._opened.get(caller)
        if opened is None or (opened.done() and (opened.cancelled() or opened.exception())):
            opened = self._opened[caller] = asyncio.ensure_future(self._open(caller))
        return await asyncio.shield(opened)

    async def _open(self, caller: Caller) -> Client:
        client = delegated(self._bootstrap, caller, gateway_id=self._gateway_id,
                           key=self._key, **self._options)
        await client.start()
        return client

    async def close(self) -> None:
        for opened in self._opened.values():
            if not opened.done():
                opened.cancel()
            elif not opened.cancelled() and opened.exception() is None:
                await opened.result().close()
