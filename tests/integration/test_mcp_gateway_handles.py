"""A handle is the caller's JSON, every field of it: the MCP gateway answers a caller about a
handle only through the intake's answer to that handle's record, and only when that answer
names the caller: its principal, and the person a gateway proposed for. Each test is one
caller's attack on another's call of the same tenant (another principal, or another person
behind the same agent), on real Kafka: the answers are written to the tenant's results topic
as the relay writes them (``Calls.fetch`` reads nothing else), and the attacker asks as the
gateway asks for it."""

from __future__ import annotations

import asyncio
import json
import uuid
from datetime import UTC, datetime

import pytest
from aiokafka import AIOKafkaProducer
from intentledger_client import Handle
from intentledger_client.contracts import ProposalOutcome, ToolCallSettled
from intentledger_client.topics import partition_for

from services.mcp_gateway.callers import Caller
from services.mcp_gateway.calls import Calls, NotTheCallers
from services.mcp_gateway.clients import Clients
from shared.identity.signatures import generate_signing_key
from shared.messaging.admin import ensure_results_topics
from shared.topology import RESULTS_PARTITIONS, results_topic

pytestmark = pytest.mark.infra
WAIT_S = 30.0
"""The gateway's wait: what a refusal must come well before."""
SHORT_S = 3.0
"""A fetch that can only end pending: long enough for the partition to be read again."""


class Ledger:
    """A fresh tenant's results topic, and the answers the relay would put on it."""

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap
        self.tenant = f"t-{uuid.uuid4().hex[:10]}"
        self.topic = results_topic(self.tenant)
        self.run = f"run-{uuid.uuid4().hex[:12]}"

    async def __aenter__(self) -> Ledger:
        await ensure_results_topics(self.bootstrap, [self.topic])
        self.producer = AIOKafkaProducer(bootstrap_servers=self.bootstrap, acks="all")
        await self.producer.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.producer.stop()

    async def settled_call(self, principal: str, call_id: str, balance: int,
                           person: str | None = None) -> Handle:
        """A call of ``principal``'s in this run (for ``person``), answered and settled
        SUCCEEDED: the handle its own caller was given."""
        handle = await self.answered_call(principal, call_id, person)
        await self.settle(handle, balance)
        return handle

    async def answered_call(self, principal: str, call_id: str, person: str | None = None, *,
                            persons_told: bool = True) -> Handle:
        """A call of ``principal``'s in this run (for ``person``), accepted by the intake, not
        settled yet; answered without ``person_id`` at all unless ``persons_told`` (an intake
        from before answers told persons)."""
        proposal, intent = uuid.uuid4(), uuid.uuid4()
        accepted = ProposalOutcome(outcome="accepted", run_id=self.run, call_id=call_id,
                                   proposal_id=proposal, tenant_id=self.tenant,
                                   principal_id=principal, person_id=person,
                                   logical_call_id=intent).model_dump(mode="json")
        if not persons_told:
            del accepted["person_id"]
        at = await self._put("ProposalAccepted", accepted)
        return Handle(tenant_id=self.tenant, run_id=self.run, call_id=call_id,
                      proposal_id=proposal, logical_call_id=intent, partition=_partition(self.run),
                      offset=at)

    async def settle(self, handle: Handle, balance: int) -> None:
        assert handle.logical_call_id is not None
        done = ToolCallSettled(run_id=self.run, call_id=handle.call_id,
                               logical_call_id=handle.logical_call_id, status="SUCCEEDED",
                               settled_at=datetime.now(UTC), result={"balance_minor": balance})
        await self._put("ToolCallSettled", done.model_dump(mode="json"))

    async def duplicate_in_another_run(self, principal: str, original: Handle) -> Handle:
        """The same call proposed again by ``principal`` in a run of its own, answered as the
        duplicate of ``original``: the handle its caller was given (the intent's states are on
        ``original``'s run's partition, the answer on this run's)."""
        run, proposal = f"run-{uuid.uuid4().hex[:12]}", uuid.uuid4()
        duplicate = ProposalOutcome(outcome="duplicate", run_id=run, call_id="c-again",
                                    proposal_id=proposal, tenant_id=self.tenant,
                                    principal_id=principal,
                                    logical_call_id=original.logical_call_id,
                                    intent_run_id=self.run, state="VALIDATED")
        at = await self._put("DuplicateProposal", duplicate.model_dump(mode="json"), run)
        return Handle(tenant_id=self.tenant, run_id=run, call_id="c-again", proposal_id=proposal,
                      logical_call_id=original.logical_call_id, intent_run_id=self.run,
                      partition=_partition(run),
                      offset=at)

    async def end(self) -> int:
        return await self._put("Unrelated", {})

    async def _put(self, event_type: str, payload: dict, run: str | None = None) -> int:
        run = run or self.run
        value = json.dumps({"event_id": str(uuid.uuid4()), "event_type": event_type,
                            "payload": payload}).encode()
        sent = await self.producer.send_and_wait(self.topic, value, key=run.encode(),
                                                 partition=_partition(run))
        return sent.offset


def _partition(run: str) -> int:
    """Where the relay puts a run's answers, and its caller's handle says they are."""
    return partition_for(run.encode(), range(RESULTS_PARTITIONS))


@pytest.fixture
async def gateway_calls(endpoints):
    clients = Clients(endpoints.kafka_bootstrap, gateway_id="mcp-gateway",
                      key=generate_signing_key("mcp-gateway"), options={}, idle_s=60, max_open=8)
    calls = Calls(clients, wait_s=WAIT_S)
    yield calls
    await calls.close()
    await clients.close()


async def test_a_copied_handle_is_refused_as_soon_as_its_answer_is_read(endpoints, gateway_calls):
    """Its call not settled yet (awaiting approval, say): the refusal comes on the intake's
    answer, which names who proposed it, not once the gateway's wait for a settled state
    is over."""
    async with Ledger(endpoints.kafka_bootstrap) as ledger:
        payers = await ledger.answered_call("payer", "c-payer")
        loop = asyncio.get_running_loop()
        began = loop.time()
        with pytest.raises(NotTheCallers):
            await gateway_calls.fetch(Caller("stocker", ledger.tenant), payers)
        refused_after = loop.time() - began
        await ledger.settle(payers, balance=4_242)
        own = await gateway_calls.fetch(Caller("payer", ledger.tenant), payers)
    assert refused_after < WAIT_S / 2, "refused on the intake's answer, not after the wait"
    assert (own.status, own.result) == ("succeeded", {"balance_minor": 4_242})


async def test_a_handle_naming_another_record_tells_nothing_of_the_intent_it_names(
        endpoints, gateway_calls):
    """The intent is followed only as the answer to the handle's own record names it: a copy
    whose record id is made up (or whose offset skips the answer) finds no answer, so no state
    of the intent it names is read for it, however it sits in the partition."""
    async with Ledger(endpoints.kafka_bootstrap) as ledger:
        payers = await ledger.settled_call("payer", "c-payer", balance=4_242)
        made_up = payers.model_copy(update={"proposal_id": uuid.uuid4()})
        skipping = payers.model_copy(update={"offset": payers.offset + 1})
        attacker = Caller("stocker", ledger.tenant)
        outcomes = [await gateway_calls.fetch(attacker, handle, SHORT_S)
                    for handle in (made_up, skipping)]
    for outcome in outcomes:
        assert (outcome.status, outcome.result, outcome.settled) == ("pending", None, None)


async def test_an_intent_spliced_into_the_callers_own_handle_is_not_followed(
        endpoints, gateway_calls):
    """The attacker's own call, answered to it, with another principal's intent id written
    into its handle, once its client has seen that intent settle go by (a client remembers
    recent states, for a duplicate that learns its intent late): it is answered about its own
    intent only."""
    async with Ledger(endpoints.kafka_bootstrap) as ledger:
        attacker = Caller("stocker", ledger.tenant)
        stockers = await ledger.answered_call("stocker", "c-stocker")
        own = asyncio.ensure_future(gateway_calls.fetch(attacker, stockers, 4 * SHORT_S))
        await asyncio.sleep(SHORT_S)  # its client now reads the partition live
        payers = await ledger.settled_call("payer", "c-payer", balance=4_242)
        await ledger.settle(stockers, balance=17)
        assert (await own).result == {"balance_minor": 17}
        spliced = stockers.model_copy(update={"logical_call_id": payers.logical_call_id})
        outcome = await gateway_calls.fetch(attacker, spliced)
    assert (outcome.status, outcome.result) == ("succeeded", {"balance_minor": 17})
    assert outcome.handle.logical_call_id == stockers.logical_call_id


async def test_a_state_the_callers_client_saw_go_by_is_not_handed_to_a_made_up_handle(
        endpoints, gateway_calls):
    """The attacker's client reads the partition for a call of its own while another
    principal's call settles on it, and remembers that state (a client remembers recent
    states for duplicates that learn their intent late); a handle made up around that intent
    must not be answered from that memory."""
    async with Ledger(endpoints.kafka_bootstrap) as ledger:
        attacker = Caller("stocker", ledger.tenant)
        waiting = Handle(tenant_id=ledger.tenant, run_id=ledger.run, call_id="c-stocker",
                         proposal_id=uuid.uuid4(), offset=await ledger.end())
        own = asyncio.ensure_future(gateway_calls.fetch(attacker, waiting, 2 * SHORT_S))
        await asyncio.sleep(SHORT_S)  # its client now reads the partition live
        payers = await ledger.settled_call("payer", "c-payer", balance=4_242)
        made_up = payers.model_copy(update={"proposal_id": uuid.uuid4(),
                                            "offset": await ledger.end()})
        outcome = await gateway_calls.fetch(attacker, made_up, SHORT_S)
        await own
    assert (outcome.status, outcome.result, outcome.settled) == ("pending", None, None)


async def test_the_callers_own_duplicate_in_another_run_is_answered_with_its_intents_result(
        endpoints, gateway_calls):
    """The way that must keep working: the caller's own call, answered as the duplicate of an
    intent whose states are on another run's partition, is answered with that intent's
    settled result, and with the intake's answer."""
    async with Ledger(endpoints.kafka_bootstrap) as ledger:
        original = await ledger.settled_call("payer", "c-payer", balance=4_242)
        again = await ledger.duplicate_in_another_run("payer", original)
        outcome = await gateway_calls.fetch(Caller("payer", ledger.tenant), again)
    assert (outcome.status, outcome.result) == ("succeeded", {"balance_minor": 4_242})
    assert outcome.answer is not None and outcome.ledger_status == "SUCCEEDED"
    assert outcome.answer.outcome == "duplicate"


async def test_the_people_behind_one_agent_read_their_own_calls_only(endpoints, gateway_calls):
    """A token issued to a person through an agent client proposes as the agent for the person
    (``agents_from_client_ids``): another person behind the same agent, or the agent itself,
    holding a copy of the handle is refused on the intake's answer, which names the person;
    the person is answered."""
    async with Ledger(endpoints.kafka_bootstrap) as ledger:
        alices = await ledger.settled_call("desk-agent", "c-alice", balance=4_242,
                                           person="finance:a")
        for other in ("finance:b", None):
            with pytest.raises(NotTheCallers):
                await gateway_calls.fetch(Caller("desk-agent", ledger.tenant, other), alices)
        own = await gateway_calls.fetch(Caller("desk-agent", ledger.tenant, "finance:a"), alices)
    assert (own.status, own.result) == ("succeeded", {"balance_minor": 4_242})


async def test_a_handle_answered_before_answers_told_persons_stays_its_principals(
        endpoints, gateway_calls):
    """A rolling upgrade: a call answered by an intake that did not yet write ``person_id`` is
    judged by its principal alone, as it was then, so a person's handle from before the
    upgrade is still answered (and another principal's copy still refused)."""
    async with Ledger(endpoints.kafka_bootstrap) as ledger:
        older = await ledger.answered_call("desk-agent", "c-alice", persons_told=False)
        await ledger.settle(older, balance=17)
        with pytest.raises(NotTheCallers):
            await gateway_calls.fetch(Caller("stocker", ledger.tenant), older, SHORT_S)
        own = await gateway_calls.fetch(Caller("desk-agent", ledger.tenant, "finance:a"), older)
    assert (own.status, own.result) == ("succeeded", {"balance_minor": 17})
