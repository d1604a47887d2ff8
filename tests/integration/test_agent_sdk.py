"""The agent SDK and the CLI against the running intake: outcomes paired by call id."""

import asyncio
import json
import os
import subprocess
import sys

import pytest

from shared.client import ProposalClient, to_anthropic_tool_results, to_openai_tool_messages
from tests.support.identities import local
from tests.support.intake import new_run, running_intake, send

pytestmark = pytest.mark.infra
U1 = local().signing_key("u-1")
DEBIT = {"wallet_id": "w-1", "amount": "12.50", "currency": "EUR"}


async def test_propose_returns_accepted_then_duplicate_for_the_same_intent(endpoints):
    run = new_run()
    async with running_intake(endpoints), ProposalClient(
            endpoints.kafka_bootstrap, run_id=run, principal_id="u-1", tenant_id="acme",
            signing_key=U1) as client:
        first = await client.propose("wallet.debit", DEBIT, call_id="c1", operation_key=f"{run}:d")
        again = await client.propose("wallet.debit", DEBIT, call_id="c2", operation_key=f"{run}:d")
    assert (first.status, again.status) == ("accepted", "duplicate")
    assert again.payload["logical_call_id"] == first.payload["logical_call_id"]


async def test_openai_and_anthropic_turns_pair_back_by_call_id(endpoints):
    run = new_run()
    chat = {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_x", "type": "function",
         "function": {"name": "wallet_debit", "arguments": json.dumps(DEBIT)}},
        {"id": "call_y", "type": "function",
         "function": {"name": "wallet.teleport", "arguments": "{}"}}]}
    claude = {"role": "assistant", "content": [
        {"type": "tool_use", "id": "toolu_z", "name": "wallet.debit", "input": DEBIT}]}
    async with running_intake(endpoints), ProposalClient(
            endpoints.kafka_bootstrap, run_id=run, principal_id="u-1", tenant_id="acme",
            signing_key=U1) as client:
        chat_outcomes = await client.propose_openai_chat(
            chat, operation_keys={"call_x": f"{run}:x", "call_y": f"{run}:y"})
        claude_outcomes = await client.propose_anthropic(claude, operation_keys={"toolu_z": f"{run}:z"})
        [responses_outcome] = await client.propose_openai_responses(
            [{"type": "reasoning", "id": "rs_1", "summary": []},
             {"type": "function_call", "id": "fc_1", "call_id": "call_r", "name": "wallet_debit",
              "arguments": json.dumps(DEBIT), "status": "completed"}],
            operation_keys={"call_r": f"{run}:r"})
    assert (responses_outcome.call_id, responses_outcome.status) == ("call_r", "accepted")
    messages = to_openai_tool_messages(chat_outcomes)
    assert [(m["tool_call_id"], json.loads(m["content"])["outcome"]) for m in messages] == [
        ("call_x", "accepted"), ("call_y", "rejected")]
    assert json.loads(messages[1]["content"])["reason_code"] == "unknown_tool"
    [block] = to_anthropic_tool_results(claude_outcomes)
    assert (block["tool_use_id"], block["is_error"]) == ("toolu_z", False)


async def test_an_unanswered_proposal_is_pending_never_guessed(endpoints):
    run = new_run()  # no intake running: nobody answers
    async with ProposalClient(endpoints.kafka_bootstrap, run_id=run, principal_id="u-1",
                              tenant_id="acme", signing_key=U1) as client:
        outcome = await client.propose("wallet.debit", DEBIT, call_id="c1",
                                       operation_key=f"{run}:p", timeout=2)
    assert outcome.status == "pending"


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
    async with ProposalClient(endpoints.kafka_bootstrap, run_id=run, principal_id="u-1",
                              tenant_id="acme", signing_key=U1) as client:
        await send(endpoints.kafka_bootstrap, earlier, key=run)  # nobody answers it yet
        async with running_intake(endpoints):
            changed = await client.propose("wallet.debit", DEBIT | {"amount": "99.00"}, call_id="c1",
                                           operation_key=f"{run}:k")
    assert (changed.status, changed.reason_code) == ("rejected", "operation_key_conflict")
