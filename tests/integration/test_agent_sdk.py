"""The agent client and the CLI against the running intake: answers paired by call id, one
client for many runs and concurrent calls, the sync facade on the same code."""

import asyncio
import json
import os
import subprocess
import sys

import pytest
from intentledger_client import Client, SyncClient, to_anthropic_tool_results, to_openai_tool_messages
from intentledger_client.topics import partition_for

from shared.topology import RESULTS_PARTITIONS, results_topic
from tests.support.identities import local
from tests.support.intake import new_run, running_intake, send

pytestmark = pytest.mark.infra
U1 = local().signing_key("u-1")
DEBIT = {"wallet_id": "w-1", "amount": "12.50", "currency": "EUR"}


def client(endpoints) -> Client:
    return Client(endpoints.kafka_bootstrap, principal_id="u-1", tenant_id="acme", signing_key=U1)


async def test_propose_returns_accepted_then_duplicate_for_the_same_intent(endpoints):
    run = new_run()
    async with running_intake(endpoints), client(endpoints) as agent:
        first = await agent.call(run, "wallet.debit", DEBIT, call_id="c1",
                                 operation_key=f"{run}:d", settle=False)
        again = await agent.call(run, "wallet.debit", DEBIT, call_id="c2",
                                 operation_key=f"{run}:d", settle=False)
    assert (first.ledger_status, again.ledger_status) == ("accepted", "duplicate")
    assert again.handle.logical_call_id == first.handle.logical_call_id is not None


async def test_another_principal_under_the_same_key_is_refused_and_told_nothing(endpoints):
    """Keys are tenant-wide and often derivable from the arguments, so another principal can
    name one: it is refused ``operation_key_in_use``, with the same arguments or others, in its
    own run or the proposer's, and is named no intent to follow; the proposer's own retry is
    still its duplicate, and no second intent exists."""
    run, theirs = new_run(), new_run()
    key = f"{run}:shared"
    async with running_intake(endpoints), client(endpoints) as owner, Client(
            endpoints.kafka_bootstrap, principal_id="mallory", tenant_id="acme",
            signing_key=local().signing_key("mallory")) as other:
        first = await owner.call(run, "wallet.debit", DEBIT, call_id="c1", operation_key=key,
                                 settle=False)
        tries = [await other.call(where, "wallet.debit", arguments, call_id=call_id,
                                  operation_key=key, settle=False, wait=20)
                 for where, arguments, call_id in (
                     (theirs, DEBIT, "m1"), (theirs, DEBIT | {"amount": "1.00"}, "m2"),
                     (run, DEBIT, "m3"))]
        again = await owner.call(run, "wallet.debit", DEBIT, call_id="c2", operation_key=key,
                                 settle=False)
    assert first.ledger_status == "accepted" and first.handle.logical_call_id is not None
    for tried in tries:
        assert (tried.status, tried.reason_code) == ("denied", "operation_key_in_use")
        assert tried.answer is not None and tried.answer.logical_call_id is None
        assert tried.answer.intent_run_id is None and tried.handle.logical_call_id is None
    assert again.ledger_status == "duplicate"
    assert again.handle.logical_call_id == first.handle.logical_call_id


async def test_openai_and_anthropic_turns_pair_back_by_call_id(endpoints):
    run = new_run()
    chat = {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_x", "type": "function",
         "function": {"name": "wallet_debit", "arguments": json.dumps(DEBIT)}},
        {"id": "call_y", "type": "function",
         "function": {"name": "wallet.teleport", "arguments": "{}"}}]}
    claude = {"role": "assistant", "content": [
        {"type": "tool_use", "id": "toolu_z", "name": "wallet.debit", "input": DEBIT}]}
    async with running_intake(endpoints), client(endpoints) as agent:
        chat_outcomes = await agent.propose_openai_chat(
            run, chat, operation_keys={"call_x": f"{run}:x", "call_y": f"{run}:y"}, settle=False)
        claude_outcomes = await agent.propose_anthropic(
            run, claude, operation_keys={"toolu_z": f"{run}:z"}, settle=False)
        [responses_outcome] = await agent.propose_openai_responses(
            run, [{"type": "reasoning", "id": "rs_1", "summary": []},
                  {"type": "function_call", "id": "fc_1", "call_id": "call_r",
                   "name": "wallet_debit", "arguments": json.dumps(DEBIT), "status": "completed"}],
            operation_keys={"call_r": f"{run}:r"}, settle=False)
    assert (responses_outcome.call_id, responses_outcome.ledger_status) == ("call_r", "accepted")
    messages = to_openai_tool_messages(chat_outcomes)
    assert [(m["tool_call_id"], json.loads(m["content"])["status"]) for m in messages] == [
        ("call_x", "pending"), ("call_y", "denied")]  # accepted: not settled yet (no dispatcher)
    assert json.loads(messages[1]["content"])["reason_code"] == "unknown_tool"
    [block] = to_anthropic_tool_results(claude_outcomes)
    assert (block["tool_use_id"], block["is_error"]) == ("toolu_z", False)


async def test_an_unanswered_proposal_is_pending_never_guessed(endpoints):
    run = new_run()  # no intake running: nobody answers
    async with client(endpoints) as agent:
        outcome = await agent.call(run, "wallet.debit", DEBIT, call_id="c1",
                                   operation_key=f"{run}:p", wait=2)
    assert (outcome.status, outcome.answer, outcome.settled) == ("pending", None, None)
    assert outcome.handle.proposal_id is not None  # it was sent: its answer can be waited for


async def test_waiting_again_without_settle_returns_on_the_intakes_answer(endpoints):
    """A handle read back in another client: ``settle=False`` returns the intake's answer (who
    proposed it, the intent) once read; waiting for the settled state, with no dispatcher
    running, ends pending, the answer read all the same."""
    run = new_run()
    async with running_intake(endpoints), client(endpoints) as agent:
        sent = await agent.call(run, "wallet.debit", DEBIT, call_id="c1",
                                operation_key=f"{run}:w", settle=False)
    handle = type(sent.handle).model_validate_json(sent.handle.model_dump_json())
    async with client(endpoints) as later:
        answered = await later.wait(handle.model_copy(update={"logical_call_id": None}),
                                    timeout=20, settle=False)
        settling = await later.wait(handle, timeout=3)
    assert (answered.status, answered.ledger_status) == ("pending", "accepted")
    assert answered.answer is not None and answered.answer.principal_id == "u-1"
    assert answered.handle.logical_call_id == sent.handle.logical_call_id is not None
    assert (settling.status, settling.ledger_status) == ("pending", "accepted")


async def test_one_client_serves_many_runs_and_concurrent_calls(endpoints):
    """Ten calls of five runs at once on one client: each gets its own answer, and the client
    reads only the partitions those runs go to."""
    runs = [new_run() for _ in range(5)]
    async with running_intake(endpoints), client(endpoints) as agent:
        outcomes = await asyncio.gather(*(
            agent.call(run, "wallet.debit", DEBIT | {"amount": f"{n}.00"}, call_id="c1" if n % 2 else "c2",
                       operation_key=f"{run}:{n}", wait=60, settle=False)
            for n, run in enumerate(runs * 2, start=1)))
        read = agent.partitions
    assert [o.ledger_status for o in outcomes] == ["accepted"] * 10
    assert len({o.handle.logical_call_id for o in outcomes}) == 10
    assert [(o.handle.run_id, o.answer.run_id) for o in outcomes if o.answer] == [
        (run, run) for run in runs * 2]
    assert {p.partition for p in read} == {
        partition_for(run.encode(), range(RESULTS_PARTITIONS)) for run in runs}
    assert {p.topic for p in read} == {results_topic("acme")}


async def test_concurrent_calls_sent_in_one_batch_each_recognise_their_answer(endpoints):
    """Calls sent in one producer batch, a few milliseconds apart (what concurrent calls come
    to under load): each must compute its own record's id to recognise the intake's answer.
    aiokafka reports the batch's first timestamp for every record of it; a client trusting
    that left every call after the first pending."""
    run = new_run()
    batching = Client(endpoints.kafka_bootstrap, principal_id="u-1", tenant_id="acme",
                      signing_key=U1, producer_options={"linger_ms": 500})

    async def one(n: int):
        await asyncio.sleep(n * 0.01)  # each record a different millisecond, same batch
        return await agent.call(run, "wallet.debit", DEBIT, call_id=f"c{n}",
                                operation_key=f"{run}:{n}", wait=20, settle=False)

    async with running_intake(endpoints), batching as agent:
        outcomes = await asyncio.gather(*(one(n) for n in range(6)))
    assert [o.ledger_status for o in outcomes] == ["accepted"] * 6
    assert len({o.handle.proposal_id for o in outcomes}) == 6


async def test_the_sync_facade_proposes_on_the_same_client(endpoints):
    run = new_run()

    def script() -> tuple[str | None, str | None]:
        with SyncClient(endpoints.kafka_bootstrap, principal_id="u-1", tenant_id="acme",
                        signing_key=U1) as agent:
            first = agent.call(run, "wallet.debit", DEBIT, call_id="c1", operation_key=f"{run}:s",
                               settle=False)
            return first.ledger_status, agent.wait(first.handle, timeout=0.5).status

    async with running_intake(endpoints):
        assert await asyncio.to_thread(script) == ("accepted", "pending")


async def test_the_cli_proposes_and_prints_the_outcome(endpoints):
    run = new_run()
    async with running_intake(endpoints):
        result = await _cli(endpoints, "propose", "--run", run, "--principal", "u-1",
                            "--tenant", "acme", "--tool", "wallet.debit", "--args", json.dumps(DEBIT),
                            "--key", f"{run}:cli",
                            "--signing-key", str(local().key_file("u-1")))
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["outcome"] == "accepted"


async def _cli(endpoints, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "INTENTLEDGER_KAFKA_BOOTSTRAP": endpoints.kafka_bootstrap,
           "INTENTLEDGER_DATABASE_URL": endpoints.database_url}
    return await asyncio.to_thread(subprocess.run, [sys.executable, "-m", "intentledger.cli", *args],
                                   env=env, capture_output=True, text=True, timeout=60)


async def test_a_late_answer_to_an_earlier_send_with_the_same_call_id_is_not_taken(endpoints):
    run = new_run()
    earlier = {"format": "generic", "run_id": run, "principal_id": "u-1", "tenant_id": "acme",
               "tool": "wallet.debit", "call_id": "c1", "operation_key": f"{run}:k", "arguments": DEBIT}
    async with client(endpoints) as agent:
        await send(endpoints.kafka_bootstrap, earlier, key=run)  # nobody answers it yet
        async with running_intake(endpoints):
            changed = await agent.call(run, "wallet.debit", DEBIT | {"amount": "99.00"},
                                       call_id="c1", operation_key=f"{run}:k", settle=False)
    assert (changed.status, changed.reason_code) == ("denied", "operation_key_conflict")
