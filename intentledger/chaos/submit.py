"""Sending a protocol's proposals the way agents do: through the SDK, in the format each names,
one model turn per message (parallel tool calls travel together)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from aiokafka import AIOKafkaProducer
from intentledger_client import Client, Outcome

from shared.contracts.fault_protocol import Proposal, RawRecord, Signer
from shared.identity.local import LocalIdentities
from shared.identity.signatures import sign
from shared.messaging.kafka_security import client_options, configured


@dataclass(frozen=True)
class Answered:
    """The intake's answer to one call: what a protocol's expectations are about."""

    call_id: str
    status: str
    """accepted | duplicate | rejected | pending"""
    payload: dict[str, Any] = field(default_factory=dict)

    @property
    def reason_code(self) -> str | None:
        return self.payload.get("reason_code")

    @classmethod
    def of(cls, outcome: Outcome) -> Answered:
        if outcome.answer is None:
            return cls(outcome.call_id, "pending")
        return cls(outcome.call_id, outcome.answer.outcome, outcome.answer.model_dump(mode="json"))


@dataclass(frozen=True)
class Sent:
    proposal: Proposal
    run_id: str
    outcome: Answered

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


class _Impostor(Client):
    """Signs with another principal's key, for another tenant, than its records name."""

    def __init__(self, *args, signed_as: Signer, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._signed_as = signed_as

    def _signature(self, value: bytes) -> str | None:
        return sign(value, self._key, principal_id=self._signed_as.principal,
                    tenant_id=self._signed_as.tenant)


async def send_turn(bootstrap: str, run_id: str, turn: list[Proposal], timeout: float,
                    identities: LocalIdentities) -> list[Sent]:
    first = turn[0]
    signer = first.signed_as
    options = {"principal_id": first.principal, "tenant_id": first.tenant,
               "kafka_options": configured().client_kwargs()}
    client = Client(bootstrap, signing_key=identities.signing_key(first.principal),
                    **options) if signer is None \
        else _Impostor(bootstrap, signed_as=signer,
                       signing_key=identities.signing_key(signer.principal), **options)
    async with client as agent:
        if first.format == "generic":
            outcomes = [await agent.call(run_id, first.tool, first.arguments,
                                         call_id=_call_id(first), operation_key=first.operation_key,
                                         wait=timeout, settle=False)]
        else:
            keys = {_call_id(p): p.operation_key for p in turn if p.operation_key} or None
            message = _message(first.format, turn)
            if first.format == "openai.responses":
                outcomes = await agent.propose_openai_responses(
                    run_id, message["output"], operation_keys=keys, wait=timeout, settle=False)
            else:
                submit = agent.propose_openai_chat if first.format == "openai.chat" \
                    else agent.propose_anthropic
                outcomes = await submit(run_id, message, operation_keys=keys, wait=timeout,
                                        settle=False)
    return [Sent(proposal, run_id, Answered.of(outcome))
            for proposal, outcome in zip(turn, outcomes, strict=True)]


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
