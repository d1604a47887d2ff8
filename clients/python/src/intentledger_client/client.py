"""The agent's client: propose tool calls for any number of runs, concurrently, and await each
call's settled outcome (``outcomes``) on the tenant's ``agent.results.<tenant>``.

Every record is signed (``signing``): with the key given, else the one the environment names
(``INTENTLEDGER_SIGNING_KEY``, a private JWK's JSON, or ``INTENTLEDGER_SIGNING_KEY_FILE``).
Without a key records go unsigned, and the intake refuses them ``signature_missing`` unless
the deployment accepts unsigned proposals for their tenant (local development only).

One client is one principal acting for one tenant. It reads only that tenant's results topic
and of it only the partitions its runs go to (``listening``); answers reach the call waiting
for them by run, provider call id and the id of the record sent (``routing``), so a late
answer to an earlier send that reused a call id is never taken for a new one. A timeout never guesses:
an outcome that has not settled by then is ``pending``, with a ``Handle`` to wait on again.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Any

from aiokafka import AIOKafkaProducer, TopicPartition
from aiokafka.structs import RecordMetadata
from aiokafka.admin import AIOKafkaAdminClient

from intentledger_client import formats, withdrawals
from intentledger_client.contracts import CallWithdrawal, proposal_record_id
from intentledger_client.outcomes import Handle, NotTheProposer, Outcome, outcome_of
from intentledger_client.listening import Listener
from intentledger_client.routing import Call
from intentledger_client.signing import (HEADER, PROPOSAL, WITHDRAWAL, SigningKey,
                                         resolve_signing_key, sign)
from intentledger_client.topics import (AGENT_PROPOSALS, AGENT_RESULTS, LEDGER_APPROVALS,
                                        results_topic)
from intentledger_client.tracing import current_traceparent

DEFAULT_WAIT_S = 30.0
LOG_APPEND_TIME = 1
"""``RecordMetadata.timestamp_type`` of a topic whose broker stamps records on append."""
Signer = Callable[[bytes, str], str]
"""A record's bytes and its use (``signing.PROPOSAL``, ``signing.WITHDRAWAL``) → its
``intentledger-signature`` header (a detached JWS)."""


class Client:
    def __init__(self, bootstrap: str, *, principal_id: str, tenant_id: str,
                 signing_key: SigningKey | str | Path | None = None,
                 results_family: str = AGENT_RESULTS, proposals_topic: str = AGENT_PROPOSALS,
                 approvals_topic: str = LEDGER_APPROVALS,
                 kafka_options: Mapping[str, Any] | None = None,
                 producer_options: Mapping[str, Any] | None = None,
                 signer: Signer | None = None) -> None:
        """``results_family``, ``proposals_topic`` and ``approvals_topic``: the deployment's
        names, if it changed them. ``kafka_options``: aiokafka's security settings
        (``security_protocol``, ``ssl_context``, ``sasl_mechanism``, ...), the same for every
        connection.
        ``producer_options``: the proposals' producer's own (``linger_ms``, to batch many
        concurrent calls; ``acks`` stays ``all``, idempotence on). ``signer``:
        signs each record's bytes instead of ``signing_key`` (a gateway proposing for the
        principal it authenticated signs as itself, naming that principal: docs/mcp.md)."""
        self._options = {"bootstrap_servers": bootstrap, **(kafka_options or {})}
        self._producer_options = {**(producer_options or {}), "acks": "all",
                                  "enable_idempotence": True}
        self.principal_id, self.tenant_id = principal_id, tenant_id
        self.topic = results_topic(tenant_id, results_family)  # refuses an invalid tenant id
        self._proposals, self._approvals = proposals_topic, approvals_topic
        self._key = resolve_signing_key(signing_key) if signer is None else None
        self._signer = signer
        self._results = Listener(self._options, self.topic)
        self._router = self._results.router

    async def __aenter__(self) -> Client:
        await self.start()
        return self

    async def __aexit__(self, kind: type[BaseException] | None, error: BaseException | None,
                        trace: TracebackType | None) -> None:
        await self.close()

    async def start(self) -> None:
        self._producer = AIOKafkaProducer(**self._options, **self._producer_options)
        self._admin = AIOKafkaAdminClient(**self._options)
        try:
            await self._producer.start()
            await self._admin.start()
            await self._results.start(self._admin)
        except BaseException:
            await self._admin.close()
            await self._producer.stop()
            raise

    async def close(self) -> None:
        await self._results.close()
        await self._admin.close()
        await self._producer.stop()

    @property
    def partitions(self) -> set[TopicPartition]:
        """The partitions of the tenant's topic this client reads (its runs' only)."""
        return self._results.partitions

    async def call(self, run_id: str, tool: str, arguments: dict[str, Any], *, call_id: str,
                   tool_version: str | None = None, operation_key: str | None = None,
                   wait: float = DEFAULT_WAIT_S, settle: bool = True) -> Outcome:
        """Propose one call and return what it came to by ``wait`` seconds."""
        message = formats.generic(tool, arguments, call_id=call_id, tool_version=tool_version,
                                  operation_key=operation_key)
        [outcome] = await self.submit(run_id, message, [call_id], wait=wait, settle=settle)
        return outcome

    async def propose_openai_chat(self, run_id: str, message: dict[str, Any], *,
                                  operation_keys: dict[str, str] | None = None,
                                  tool_version: str | None = None, wait: float = DEFAULT_WAIT_S,
                                  settle: bool = True) -> list[Outcome]:
        """A Chat Completions assistant message, as the API returned it."""
        envelope, call_ids = formats.openai_chat(message, operation_keys, tool_version)
        return await self.submit(run_id, envelope, call_ids, wait=wait, settle=settle)

    async def propose_openai_responses(self, run_id: str,
                                       output: list[dict[str, Any]] | dict[str, Any], *,
                                       operation_keys: dict[str, str] | None = None,
                                       tool_version: str | None = None,
                                       wait: float = DEFAULT_WAIT_S,
                                       settle: bool = True) -> list[Outcome]:
        """``response.output`` items; results pair by ``call_id`` (not the ``fc_`` item id)."""
        envelope, call_ids = formats.openai_responses(output, operation_keys, tool_version)
        return await self.submit(run_id, envelope, call_ids, wait=wait, settle=settle)

    async def propose_anthropic(self, run_id: str, message: dict[str, Any], *,
                                operation_keys: dict[str, str] | None = None,
                                tool_version: str | None = None, wait: float = DEFAULT_WAIT_S,
                                settle: bool = True) -> list[Outcome]:
        """A Messages API assistant message, as the API returned it."""
        envelope, call_ids = formats.anthropic(message, operation_keys, tool_version)
        return await self.submit(run_id, envelope, call_ids, wait=wait, settle=settle)

    async def submit(self, run_id: str, message: dict[str, Any], call_ids: Sequence[str], *,
                     wait: float = DEFAULT_WAIT_S, settle: bool = True) -> list[Outcome]:
        """Send one message of any format; one outcome per call id, in the caller's order,
        each settled (or, with ``settle=False``, answered by the intake) by ``wait`` seconds."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait
        calls = [Call(_handle(self, run_id, call_id, message), settle=settle)
                 for call_id in call_ids]
        for call in calls:
            self._router.register(call)  # before sending: no answer can come before its call
        try:
            try:
                async with asyncio.timeout(wait):
                    await self._send(run_id, message, calls)
            except TimeoutError:  # not acknowledged: no answer can be told apart as its own
                return [outcome_of(call.handle, None, None) for call in calls]
            left = max(0.0, deadline - loop.time())
            return list(await asyncio.gather(*(call.wait(left) for call in calls)))
        finally:
            for call in calls:
                self._router.unregister(call)

    async def wait(self, handle: Handle, timeout: float = DEFAULT_WAIT_S, *,
                   settle: bool = True, proposer: str | None = None,
                   person: str | None = None) -> Outcome:
        """The outcome of a call proposed earlier, by this process or another (a ``Handle``
        read back from JSON): its answers are read again from where the handle says. With
        ``settle=False``, as soon as the intake's answer is read (who proposed it, and the
        intent it is).

        ``proposer``: for a service that answers others about handles they hand it (the MCP
        gateway), every field of which is their word. The call is answered only through the
        intake's answer to the handle's record, and only if that answer names ``proposer``
        and ``person`` (the person a gateway proposed for; None: a call proposed for no
        person): the intent (and the run its states are on) is followed as that answer names
        it, never as the handle says, and an answer naming another principal or another person
        raises ``NotTheProposer`` as soon as it is read."""
        self._check_tenant(handle)
        if handle.proposal_id is None:
            return outcome_of(handle, None, None)
        if proposer is not None:
            handle = handle.model_copy(update={"logical_call_id": None, "intent_run_id": None})
        call = Call(handle, settle=settle, proposer=proposer, person=person)
        self._router.register(call)
        try:
            await self._results.place([call], look_back_from=handle.offset)
            outcome = await call.wait(timeout)
        finally:
            self._router.unregister(call)
        if call.foreign:
            raise NotTheProposer(f"the call is not one {proposer!r} proposed"
                                 + (f" for {person!r}" if person is not None else ""))
        return outcome

    async def withdraw(self, handle: Handle, reason: str, *,
                       wait: float = DEFAULT_WAIT_S) -> Outcome:
        """Withdraw this principal's call while it awaits people's approval, and return what
        it came to by ``wait`` seconds: ``denied`` ``call_withdrawn`` once the policy has
        applied the withdrawal (nothing is dispatched; an approval given afterwards counts for
        nothing). A call the policy decided first keeps its decision and its latest state is
        returned (settled, or ``pending`` while an allowed call is under way): withdrawing is
        not cancelling an effect. ``awaiting_approval`` at the end: not applied by then (wait
        on its handle again).

        The policy counts a withdrawal only from the call's own proposer (this client's
        signature, or its gateway's for the agent and person the call was proposed for), and
        records every one it can read, counted or refused with its reason, in
        ``policy.withdrawals``. ``handle``: the call's (an ``Outcome``'s, or read back from
        JSON); one the intake has not answered yet is waited on first, and one it refused is
        returned as it is, with nothing sent."""
        self._check_tenant(handle)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait
        intent = handle.logical_call_id
        if intent is None:
            answered = await self.wait(handle, wait, settle=False)
            handle, intent = answered.handle, answered.handle.logical_call_id
            if intent is None:  # refused, or not answered by then: nothing to withdraw
                return answered
        run_id = handle.intent_run_id or handle.run_id
        value, headers = withdrawals.record(CallWithdrawal(
            tenant_id=self.tenant_id, run_id=run_id, logical_call_id=intent,
            principal_id=self.principal_id, reason=reason, decided_at=datetime.now(UTC)))
        if (signature := self._signature(value, WITHDRAWAL)) is not None:
            headers.append((HEADER, signature.encode()))
        try:
            async with asyncio.timeout(max(0.0, deadline - loop.time())):
                await self._producer.send_and_wait(self._approvals, value, key=run_id.encode(),
                                                   headers=headers)
        except TimeoutError:  # not acknowledged: it may or may not reach the policy
            return outcome_of(handle, None, None)
        # every state from the first: a handle past the call's last state would wait for none
        outcome = await self.wait(handle.model_copy(update={"settled_after": -1}),
                                  max(0.0, deadline - loop.time()))
        while outcome.status == "awaiting_approval" and (left := deadline - loop.time()) > 0:
            outcome = await self.wait(outcome.handle, left)
        return outcome

    def _check_tenant(self, handle: Handle) -> None:
        if handle.tenant_id != self.tenant_id:
            raise ValueError(f"a handle of tenant {handle.tenant_id!r}; this client acts for "
                             f"{self.tenant_id!r} only")

    async def _send(self, run_id: str, message: dict[str, Any], calls: list[Call]) -> None:
        await self._results.place(calls)
        value = json.dumps({"run_id": run_id, "principal_id": self.principal_id,
                            "tenant_id": self.tenant_id} | message).encode()
        created_ms = time.time_ns() // 1_000_000
        sent = await self._producer.send_and_wait(self._proposals, value, key=run_id.encode(),
                                                  timestamp_ms=created_ms,
                                                  headers=self._headers(value) or None)
        proposal_id = proposal_record_id(self._proposals, sent.partition, sent.offset,
                                         _stored_timestamp(sent, created_ms), value)
        for call in calls:
            self._router.sent(call, proposal_id)

    def _headers(self, value: bytes) -> list[tuple[str, bytes]]:
        """The record's signature (just before it is sent: it lives two minutes) and the
        agent's trace, if it records one."""
        headers = []
        if (signature := self._signature(value)) is not None:
            headers.append((HEADER, signature.encode()))
        if traceparent := current_traceparent():
            headers.append(("traceparent", traceparent.encode()))
        return headers

    def _signature(self, value: bytes, use: str = PROPOSAL) -> str | None:
        if self._signer is not None:
            return self._signer(value, use)
        if self._key is None:
            return None
        return sign(value, self._key, principal_id=self.principal_id, tenant_id=self.tenant_id,
                    use=use)


def _stored_timestamp(sent: RecordMetadata, created_ms: int) -> int:
    """The timestamp the broker stored for the record, which the intake derives the proposal's
    id from: the one the client set (CreateTime), unless the topic stamps records itself
    (LogAppendTime, a whole batch's). Not ``sent.timestamp`` for CreateTime: aiokafka 0.14
    reports the batch's first record's timestamp for every record of a batch, so concurrent
    calls sent in one batch would compute another record's id and never recognise their
    answers."""
    return sent.timestamp if sent.timestamp_type == LOG_APPEND_TIME else created_ms


def _handle(client: Client, run_id: str, call_id: str, message: dict[str, Any]) -> Handle:
    keys = message.get("operation_keys") or {}
    return Handle(tenant_id=client.tenant_id, run_id=run_id, call_id=call_id, proposal_id=None,
                  operation_key=message.get("operation_key") or keys.get(call_id))
