"""Sending a protocol's proposals the way agents do: through the SDK, in the format each names,
one model turn per message (parallel tool calls travel together)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from aiokafka import AIOKafkaProducer

from shared.client import ProposalClient
from shared.client.agent import Outcome
from shared.contracts.fault_protocol import Proposal, RawRecord, Signer
from shared.identity.local import LocalIdentities
from shared.identity.signatures import HEADER, sign
from shared.messaging.kafka_security import client_options


@dataclass(frozen=True)
class Sent:
    proposal: Proposal
    run_id: str
    outcome: Outcome

    @property
    def logical_call_id(self) -> str | None:
        return self.outcome.payload.get("logical_call_id")


def turns(proposals: list[Proposal]) -> Iterator[list[Proposal]]:
    """Proposals in file order; those naming the same message form one turn, sent at the place
    of the first of them."""
    seen: set[str] = set()
    for proposal in proposals:
        if proposal.message is None:
            yield [proposal]
        elif proposal.message not in seen:
            seen.add(proposal.message)
            yield [p for p in proposals if p.message == proposal.message]


class _Impostor(ProposalClient):
    """Signs with another principal's key, for another tenant, than its records name."""

    def __init__(self, *args, signed_as: Signer, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._signed_as = signed_as

    def _headers(self, value: bytes) -> list[tuple[str, bytes]]:
        return [(HEADER, sign(value, self._key, principal_id=self._signed_as.principal,
                              tenant_id=self._signed_as.tenant).encode())]


async def send_turn(bootstrap: str, run_id: str, turn: list[Proposal], timeout: float,
                    identities: LocalIdentities) -> list[Sent]:
    first = turn[0]
    signer = first.signed_as
    client = ProposalClient(bootstrap, run_id=run_id, principal_id=first.principal,
                            tenant_id=first.tenant,
                            signing_key=identities.signing_key(first.principal)) if signer is None \
        else _Impostor(bootstrap, run_id=run_id, principal_id=first.principal,
                       tenant_id=first.tenant, signed_as=signer,
                       signing_key=identities.signing_key(signer.principal))
    async with client as agent:
        if first.format == "generic":
            outcomes = [await agent.propose(first.tool, first.arguments, call_id=_call_id(first),
                                            operation_key=first.operation_key, timeout=timeout)]
        else:
            keys = {_call_id(p): p.operation_key for p in turn if p.operation_key} or None
            message = _message(first.format, turn)
            if first.format == "openai.responses":
                outcomes = await agent.propose_openai_responses(
                    message["output"], operation_keys=keys, timeout=timeout)
            else:
                submit = agent.propose_openai_chat if first.format == "openai.chat" \
                    else agent.propose_anthropic
                outcomes = await submit(message, operation_keys=keys, timeout=timeout)
    return [Sent(proposal, run_id, outcome) for proposal, outcome in zip(turn, outcomes, strict=True)]


def _message(format_: str, turn: list[Proposal]) -> dict[str, Any]:
    """The turn as the provider's API returns it (what an agent framework would forward)."""
    if format_ == "openai.chat":
        return {"role": "assistant", "content": None, "tool_calls": [
            {"id": _call_id(p), "type": "function",
             "function": {"name": p.tool, "arguments": json.dumps(p.arguments)}} for p in turn]}
    if format_ == "openai.responses":
        return {"output": [{"type": "function_call", "id": f"fc_{_call_id(p)}",
                            "call_id": _call_id(p), "name": p.tool, "status": "completed",
                            "arguments": json.dumps(p.arguments)} for p in turn]}
    return {"role": "assistant", "content": [
        {"type": "tool_use", "id": _call_id(p), "name": p.tool, "input": p.arguments}
        for p in turn]}


def _call_id(proposal: Proposal) -> str:
    return proposal.call_id or proposal.name


async def publish_raw(bootstrap: str, records: list[RawRecord]) -> dict[str, tuple[str, int, int]]:
    """Publish each record's bytes verbatim; returns where each landed (topic, partition, offset)."""
    producer = AIOKafkaProducer(**client_options(bootstrap), acks="all", enable_idempotence=True)
    await producer.start()
    try:
        placed = {}
        for record in records:
            sent = await producer.send_and_wait(
                record.topic, record.value.encode(),
                key=record.key.encode() if record.key is not None else None)
            placed[record.name] = (record.topic, sent.partition, sent.offset)
        return placed
    finally:
        await producer.stop()
