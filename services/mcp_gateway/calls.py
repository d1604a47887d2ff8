"""``tools/call``: one proposal on behalf of the caller, answered with what it came to.

The operation key names the intent, never the MCP request id (a client's retry gets a new one):
it is the caller's ``_meta["io.intentledger/operation_key"]`` if given, else its
``operation_key`` argument (offered by tools whose key the caller states: ``catalog``), else the
tool's own key scheme derives it from the arguments (a tool whose key the caller must state is
refused ``operation_key_missing`` without one). The run is the caller's ``_meta["io.intentledger/run_id"]``,
else one per operation key, so a retry lands in the run of its original.

A client that drops the connection cancels the handler; the proposal is not cancelled with it.
It runs in a task of its own that the handler only stops waiting for: once published, the
intent exists, and the client's retry under the same key is answered as its duplicate, with
the same outcome, and never takes effect twice.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import uuid
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import mcp_types as types
from intentledger_client import Client, Handle, NotTheProposer, Outcome
from pydantic import ValidationError

from services.mcp_gateway import results
from services.mcp_gateway.callers import Caller
from services.mcp_gateway.clients import Clients
from services.mcp_gateway.settings import OPERATION_KEY_META

RUN_META = "io.intentledger/run_id"


class NotTheCallers(ValueError):
    """A handle of another tenant's call, or of another principal's, or of another person's
    behind the same agent (a handle or task id is not a secret: a caller is answered only about
    the calls it proposed)."""


class Calls:
    def __init__(self, clients: Clients, wait_s: float) -> None:
        self._clients, self._wait_s = clients, wait_s
        self._running: set[asyncio.Task[Outcome]] = set()

    async def propose(self, caller: Caller, tool: str, arguments: dict[str, Any],
                      meta: Mapping[str, Any] | None, stated_key: str | None = None) -> Outcome:
        """``stated_key``: the key the caller gave among the arguments (``_meta``'s wins)."""
        key = _text((meta or {}).get(OPERATION_KEY_META)) or stated_key
        run_id = _text((meta or {}).get(RUN_META)) or run_for(caller, key)
        call_id = f"mcp-{uuid.uuid4().hex}"
        return await self._detached(caller, lambda client: client.call(
            run_id, tool, arguments, call_id=call_id, operation_key=key, wait=self._wait_s))

    async def fetch(self, caller: Caller, handle: Handle, wait: float | None = None) -> Outcome:
        """What an earlier call came to, by its handle; the caller's own calls only
        (``NotTheCallers``): its client reads no other tenant's answers, and every field of a
        handle is the caller's word, so the call is answered only through the intake's answer
        to the handle's record, and only when that answer names the caller, its principal and
        its person (``Client.wait``'s ``proposer`` and ``person``; an answer from an intake
        that did not yet tell persons, by its principal alone): a handle naming another's
        intent around a made-up record id, or an offset past its answer, is told nothing, not
        even a state the caller's client saw go by."""
        if handle.tenant_id != caller.tenant_id:
            raise NotTheCallers(f"a handle of tenant {handle.tenant_id!r}")
        try:
            return await self._detached(caller, lambda client: client.wait(
                handle, timeout=wait or self._wait_s, proposer=caller.principal_id,
                person=caller.person_id))
        except NotTheProposer:
            raise NotTheCallers("a handle of another principal's (or person's) call") from None

    async def withdraw(self, caller: Caller, handle: Handle, reason: str,
                       wait: float) -> Outcome:
        """Withdraw the caller's call that awaits approval, by the handle ``fetch`` answered it
        with (so the intent it names is the intake's word, not the caller's); what it came to
        by ``wait`` seconds (``Client.withdraw``). The caller's client signs it as the
        gateway, naming the caller's agent and person, as it signs the caller's proposals:
        the policy counts it only if they are the call's."""
        if handle.logical_call_id is None:  # the client would follow the handle unchecked
            raise NotTheCallers("only a handle fetch answered names the call to withdraw")
        return await self._detached(caller, lambda client: client.withdraw(handle, reason,
                                                                           wait=wait))

    async def outcome(self, caller: Caller, arguments: dict[str, Any]) -> types.CallToolResult:
        """``intentledger.outcome``: the answer for the handle of a pending answer."""
        try:
            handle = Handle.model_validate(arguments.get("handle"))
            return results.answer(await self.fetch(caller, handle))
        except (ValidationError, NotTheCallers):
            return results.refused("handle_invalid", "not a handle an earlier call returned")

    async def _detached(self, caller: Caller,
                        work: Callable[[Client], Awaitable[Outcome]]) -> Outcome:
        """Awaited by the handler, but not cancelled with it; the caller's client stays open
        until it is done."""
        async def with_client() -> Outcome:
            async with self._clients.using(caller) as client:
                return await work(client)

        task = asyncio.ensure_future(with_client())
        self._running.add(task)
        task.add_done_callback(self._running.discard)
        return await asyncio.shield(task)

    async def close(self) -> None:
        """Let proposals in flight be published (each is bounded by the wait)."""
        await asyncio.gather(*self._running, return_exceptions=True)


def run_for(caller: Caller, key: str | None) -> str:
    """One run per caller (and person) and operation key (a fresh one without a key): a retry
    joins the run of its original, whose answers its client reads. A caller with no person
    keeps the form runs were named in before persons were (its retries after that upgrade
    still join their originals' runs); with a person, each name is a field of its own, so no
    key of the agent's spells a person's run."""
    if key is None:
        return f"mcp-{uuid.uuid4().hex}"
    named = (f"{caller.tenant_id}\0{caller.principal_id}\0{key}" if caller.person_id is None
             else json.dumps([caller.tenant_id, caller.principal_id, caller.person_id, key]))
    digest = hashlib.sha256(named.encode())
    return f"mcp-{digest.hexdigest()[:32]}"


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None
