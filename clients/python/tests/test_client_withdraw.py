"""``Client.withdraw`` before the broker: what it sends, where, signed for what; what it
returns for each course the call takes; and what it never sends (another tenant's handle, a
call the intake refused). The policy's side, and the whole path on Kafka and PostgreSQL, are
the server's tests (``tests/integration/test_agent_loop.py``)."""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

import pytest
from joserfc import jws
from joserfc.jwk import OKPKey

from intentledger_client import Client, Handle, Outcome, ProposalOutcome, Status
from intentledger_client.signing import HEADER, REGISTRY, WITHDRAWAL, typ

KEY = OKPKey.generate_key("Ed25519", {"kid": "agent-key"})
INTENT = uuid.uuid4()


class Producer:
    def __init__(self, hangs: bool = False) -> None:
        self.sent: list[dict[str, Any]] = []
        self._hangs = hangs

    async def send_and_wait(self, topic: str, value: bytes, *, key: bytes,
                            headers: list[tuple[str, bytes]]) -> None:
        if self._hangs:
            await asyncio.Event().wait()
        self.sent.append({"topic": topic, "value": value, "key": key, "headers": dict(headers)})


def client(producer: Producer, states: list[tuple[int, Status]],
           answer: Outcome | None = None) -> Client:
    """A client whose sends are recorded, and whose waits are answered as the results topic
    would answer them: the first of the call's ``states`` (offset, status) after the handle's
    ``settled_after``, else ``pending``; ``answer``: the intake's, for a wait without settling."""
    agent = Client("127.0.0.1:1", principal_id="agent-7", tenant_id="acme", signing_key=KEY,
                   approvals_topic="approvals.test")
    agent._producer = producer

    async def wait(handle: Handle, timeout: float = 0, *, settle: bool = True,
                   **_: Any) -> Outcome:
        if not settle and answer is not None:
            return answer
        for offset, status in states:
            if offset > handle.settled_after:
                return Outcome(status=status,
                               handle=handle.model_copy(update={"settled_after": offset}))
        return Outcome(status="pending", handle=handle)
    agent.wait = wait  # type: ignore[method-assign]
    return agent


def handle(**fields: Any) -> Handle:
    return Handle.model_validate({"tenant_id": "acme", "run_id": "run-2", "call_id": "c",
                                  "proposal_id": uuid.uuid4(), "logical_call_id": INTENT} | fields)


async def test_a_withdrawal_names_the_intent_in_its_own_run_signed_for_withdrawing() -> None:
    """A duplicate's handle names the run its intent is in (``intent_run_id``): the policy
    knows the intent there, and its states are keyed by it. The call's awaiting state, read
    again, is waited past to the state the withdrawal brings."""
    producer = Producer()
    duplicate = handle(intent_run_id="run-1", settled_after=5)
    agent = client(producer, [(5, "awaiting_approval"), (9, "denied")])
    withdrawn = await agent.withdraw(duplicate, "the user changed their mind", wait=5)
    assert (withdrawn.status, withdrawn.handle.settled_after) == ("denied", 9)
    [sent] = producer.sent
    assert (sent["topic"], sent["key"]) == ("approvals.test", b"run-1")
    payload = json.loads(sent["value"])["payload"]
    assert (payload["logical_call_id"], payload["run_id"], payload["principal_id"]) == (
        str(INTENT), "run-1", "agent-7")
    signed = jws.extract_compact(sent["headers"][HEADER], payload=sent["value"],
                                 registry=REGISTRY)
    assert jws.validate_compact(signed, KEY, registry=REGISTRY)
    assert (signed.protected["typ"], signed.protected["principal"]) == (typ(WITHDRAWAL), "agent-7")


async def test_a_call_settled_before_its_withdrawal_is_answered_with_its_settled_state() -> None:
    """Its handle is past its last state: the answer is that state, at once, not ``pending``
    after the whole wait."""
    agent = client(Producer(), [(5, "awaiting_approval"), (7, "succeeded")])
    settled = await asyncio.wait_for(agent.withdraw(handle(settled_after=7), "too late",
                                                    wait=30), 1)
    assert settled.status == "succeeded"


async def test_a_call_allowed_and_under_way_is_pending_at_the_end_of_the_wait() -> None:
    agent = client(Producer(), [(5, "awaiting_approval")])
    assert (await agent.withdraw(handle(settled_after=5), "too late", wait=0.3)).status == \
        "pending"


async def test_an_unanswered_handle_is_answered_first_and_a_refused_call_is_not_withdrawn() -> None:
    producer = Producer()
    unanswered = handle(logical_call_id=None)
    refusal = ProposalOutcome(outcome="rejected", run_id="run-2", call_id="c",
                              reason_code="unknown_tool")
    refused = Outcome(status="denied", handle=unanswered, answer=refusal)
    assert await client(producer, [], refused).withdraw(unanswered, "why", wait=5) is refused
    assert producer.sent == []


async def test_a_send_not_acknowledged_within_the_wait_is_pending() -> None:
    outcome = await asyncio.wait_for(client(Producer(hangs=True), []).withdraw(
        handle(), "why", wait=0.2), 2)
    assert outcome.status == "pending"


async def test_another_tenants_handle_is_refused_before_anything_is_sent() -> None:
    producer = Producer()
    with pytest.raises(ValueError, match="globex"):
        await client(producer, []).withdraw(handle(tenant_id="globex"), "why", wait=5)
    assert producer.sent == []
