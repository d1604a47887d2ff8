"""``Client.withdraw`` before the broker: what it sends, where, signed for what; and what it
never sends (another tenant's handle, a call the intake refused). The policy's side, and the
whole path, are the server's tests (``tests/integration/test_agent_loop.py``)."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from joserfc import jws
from joserfc.jwk import OKPKey

from intentledger_client import Client, Handle, Outcome, ProposalOutcome
from intentledger_client.signing import HEADER, REGISTRY, WITHDRAWAL, typ

KEY = OKPKey.generate_key("Ed25519", {"kid": "agent-key"})
INTENT = uuid.uuid4()


class Producer:
    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []

    async def send_and_wait(self, topic: str, value: bytes, *, key: bytes,
                            headers: list[tuple[str, bytes]]) -> None:
        self.sent.append({"topic": topic, "value": value, "key": key, "headers": dict(headers)})


def client(producer: Producer, answers: list[Outcome]) -> Client:
    """A client whose sends are recorded and whose waits are answered from ``answers``."""
    agent = Client("127.0.0.1:1", principal_id="agent-7", tenant_id="acme", signing_key=KEY,
                   approvals_topic="approvals.test")
    agent._producer = producer

    async def wait(handle: Handle, timeout: float = 0, **_: Any) -> Outcome:
        return answers.pop(0)
    agent.wait = wait  # type: ignore[method-assign]
    return agent


def handle(**fields: Any) -> Handle:
    return Handle.model_validate({"tenant_id": "acme", "run_id": "run-2", "call_id": "c",
                                  "proposal_id": uuid.uuid4(), "logical_call_id": INTENT} | fields)


async def test_a_withdrawal_names_the_intent_in_its_own_run_signed_for_withdrawing() -> None:
    """A duplicate's handle names the run its intent is in (``intent_run_id``): the policy
    knows the intent there, and its states are keyed by it."""
    producer = Producer()
    duplicate = handle(intent_run_id="run-1")
    withdrawn = Outcome(status="denied", handle=duplicate)
    agent = client(producer, [withdrawn])
    assert await agent.withdraw(duplicate, "the user changed their mind", wait=5) is withdrawn
    [sent] = producer.sent
    assert (sent["topic"], sent["key"]) == ("approvals.test", b"run-1")
    payload = json.loads(sent["value"])["payload"]
    assert (payload["logical_call_id"], payload["run_id"], payload["principal_id"]) == (
        str(INTENT), "run-1", "agent-7")
    signed = jws.extract_compact(sent["headers"][HEADER], payload=sent["value"],
                                 registry=REGISTRY)
    assert jws.validate_compact(signed, KEY, registry=REGISTRY)
    assert (signed.protected["typ"], signed.protected["principal"]) == (typ(WITHDRAWAL), "agent-7")


async def test_an_unanswered_handle_is_answered_first_and_a_refused_call_is_not_withdrawn() -> None:
    producer = Producer()
    unanswered = handle(logical_call_id=None)
    refusal = ProposalOutcome(outcome="rejected", run_id="run-2", call_id="c",
                              reason_code="unknown_tool")
    refused = Outcome(status="denied", handle=unanswered, answer=refusal)
    assert await client(producer, [refused]).withdraw(unanswered, "why", wait=5) is refused
    assert producer.sent == []


async def test_another_tenants_handle_is_refused_before_anything_is_sent() -> None:
    producer = Producer()
    with pytest.raises(ValueError, match="globex"):
        await client(producer, []).withdraw(handle(tenant_id="globex"), "why", wait=5)
    assert producer.sent == []
