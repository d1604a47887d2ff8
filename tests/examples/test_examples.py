"""Every example of ``examples/`` run as a user runs it: a process of its own, configured by the
environment only, against the real Kafka and PostgreSQL of the test session. Topics, groups,
schemas, runs and keys are unique per test, so the examples' own defaults never collide with
the pipeline tests on the shared topics."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import yaml

from shared.config import Endpoints
from shared.contracts.effect_requests import EFFECT_RECEIPT_ISSUED, EFFECT_REQUESTED
from shared.messaging.envelope import Envelope
from shared.tools import load_registry
from shared.operator.publish import publish
from shared.identity.principals import parse_principals
from shared.identity.signatures import SignatureRefused, generate_signing_key, verify
from tests.support.capabilities import capability_for
from tests.support.identities import local
from tests.support.intake import new_run, running_intake
from tests.support.kafka import committed, create_topic, read_topic, unique_topic

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
EFFECT_COMMITTED = json.loads(
    (EXAMPLES.parent / "schemas/examples/ledger.effects/effect-committed.json").read_text())
infra = pytest.mark.infra


async def run_example(endpoints: Endpoints, *command: str,
                      timeout: float = 90.0) -> subprocess.CompletedProcess:
    """The example as a process with nothing but the documented environment; from a directory
    outside the repository, so nothing resolves by the working directory."""
    env = {**os.environ, "INTENTLEDGER_KAFKA_BOOTSTRAP": endpoints.kafka_bootstrap,
           "INTENTLEDGER_DATABASE_URL": endpoints.database_url}
    argv = [sys.executable, *command] if command[0].endswith(".py") else list(command)
    return await asyncio.to_thread(subprocess.run, argv, env=env, capture_output=True, text=True,
                                   timeout=timeout, cwd=tempfile.gettempdir())


def example(name: str) -> str:
    return str(EXAMPLES / name)


# agent_openai.py

def answers_of(stdout: str) -> dict[str, list[str]]:
    """``call_id outcome detail...`` lines, by call id."""
    return {line.split()[0]: line.split()[1:] for line in stdout.splitlines()
            if line.startswith("call_")}


@infra
async def test_the_openai_agent_is_accepted_then_duplicate_under_the_same_key(endpoints, pool):
    run, key = new_run(), f"{uuid.uuid4().hex[:12]}:debit"
    command = (example("agent_openai.py"), "--run", run, "--operation-key", key, "--answered",
               "--signing-key", str(local().key_file("user-42")))
    async with running_intake(endpoints):
        first = await run_example(endpoints, *command)
        again = await run_example(endpoints, *command)
    assert first.returncode == 0, first.stderr
    assert again.returncode == 0, again.stderr
    debit, refused = (answers_of(first.stdout)[call] for call in ("call_debit", "call_teleport"))
    assert debit[0] == "accepted", first.stdout
    assert refused == ["denied", "reason_code=unknown_tool"]
    intent_id = debit[1].removeprefix("logical_call_id=")
    row = await pool.fetchrow("SELECT run_id, tool_name FROM proposal_intake.logical_calls "
                              "WHERE logical_call_id = $1", uuid.UUID(intent_id))
    assert (row["run_id"], row["tool_name"]) == (run, "wallet.debit")
    assert answers_of(again.stdout)["call_debit"] == ["duplicate", f"logical_call_id={intent_id}"]


# effects_subscriber.py and effects_kcat.sh

def committed_effect(run: str) -> Envelope:
    payload = EFFECT_COMMITTED["payload"] | {
        "run_id": run, "logical_call_id": str(uuid.uuid4()),
        "operation_key": f"acme:caller_stated:{uuid.uuid4().hex}"}
    return Envelope.new(event_type="EffectCommitted", run_id=run, producer="dispatcher",
                        payload=payload)


async def two_effects_and_a_redelivered_copy(bootstrap: str) -> tuple[str, list[Envelope]]:
    topic, run = unique_topic("ledger.effects"), new_run()
    first, second = committed_effect(run), committed_effect(run)
    await create_topic(bootstrap, topic, partitions=1)
    await publish(bootstrap, topic, first, second, first)  # the relay published `first` twice
    return topic, [first, second]


@infra
async def test_the_python_subscriber_prints_each_effect_once_and_commits(endpoints):
    topic, effects = await two_effects_and_a_redelivered_copy(endpoints.kafka_bootstrap)
    group = f"example-{uuid.uuid4().hex[:8]}"
    result = await run_example(endpoints, example("effects_subscriber.py"), "--topic", topic,
                               "--group", group, "--max-messages", "3", "--timeout", "60")
    assert result.returncode == 0, result.stderr
    printed = [json.loads(line) for line in result.stdout.splitlines()]
    assert [(p["event_id"], p["operation_key"]) for p in printed] == [
        (str(e.event_id), e.payload["operation_key"]) for e in effects]
    assert "redelivered copy" in result.stderr
    assert await committed(endpoints.kafka_bootstrap, group, topic, partitions=1) == 3


@infra
@pytest.mark.tooling
async def test_the_kcat_subscriber_prints_each_effect_once(endpoints):
    if shutil.which("kcat") is None:
        pytest.skip("kcat is not installed (Debian/Ubuntu: apt-get install kcat)")
    topic, effects = await two_effects_and_a_redelivered_copy(endpoints.kafka_bootstrap)
    result = await run_example(endpoints, example("effects_kcat.sh"), "-t", topic,
                               "-g", f"example-{uuid.uuid4().hex[:8]}", "-c", "3", "-w", "60")
    assert result.returncode == 0, result.stderr
    assert [line.split() for line in result.stdout.splitlines()] == [
        [str(e.event_id), "EffectCommitted", e.payload["operation_key"]] for e in effects]


# downstream_service.py

def effect_requested(run: str, reply_topic: str, *, authorized: bool = True) -> dict:
    """As the dispatcher sends it, with the capability the session's policy key signed (or,
    not ``authorized``, none: what a row forged into an outbox carries)."""
    key, call = f"acme:caller_stated:{uuid.uuid4().hex}", uuid.uuid4()
    arguments = {"account_id": "tenant/acme/a-1", "amount": 2500, "currency": "EUR"}
    capability = capability_for(key, "credits.grant", arguments, call) if authorized else None
    return {"operation_key": key, "tenant_id": "acme", "tool_name": "credits.grant",
            "tool_version": "1", "attempt": 1, "fence": 1, "logical_call_id": str(call),
            "canonical_arguments": arguments,
            "deadline_at": (datetime.now(UTC) + timedelta(minutes=5)).isoformat(),
            "reply_topic": reply_topic,
            "capability": capability.model_dump(mode="json") if capability else None}


@infra
async def test_the_downstream_service_applies_a_repeated_request_once_and_a_forged_one_never(
        endpoints, pool):
    requests, replies, run = unique_topic("effects.credits"), unique_topic("receipts"), new_run()
    schema = f"credits_{uuid.uuid4().hex[:10]}"
    for topic in (requests, replies):
        await create_topic(endpoints.kafka_bootstrap, topic, partitions=1)
    asked, forged = effect_requested(run, replies), effect_requested(run, replies, authorized=False)
    await publish(endpoints.kafka_bootstrap, requests,  # the dispatcher asking twice, a forgery
                  *(Envelope.new(event_type=EFFECT_REQUESTED, run_id=run, producer="dispatcher",
                                 payload=payload) for payload in (asked, asked, forged)))
    try:
        result = await run_example(endpoints, example("downstream_service.py"), "--topic",
                                   requests, "--group", schema, "--schema", schema,
                                   "--max-messages", "3", "--timeout", "60")
        assert result.returncode == 0, result.stderr
        credits = await pool.fetch(f"SELECT operation_key, amount_minor FROM {schema}.credits")
    finally:
        await pool.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
    assert [tuple(row) for row in credits] == [(asked["operation_key"], 2500)]
    receipts = [json.loads(r.value) for r in await read_topic(endpoints.kafka_bootstrap, replies,
                                                                until=3, timeout=30)]
    assert [r["event_type"] for r in receipts] == [EFFECT_RECEIPT_ISSUED] * 3
    first, again, refused = (r["payload"] for r in receipts)
    assert (refused["status"], refused["reason"]) == ("rejected", "capability_missing")
    assert (first["status"], first["replayed"]) == ("applied", False)
    assert (again["status"], again["replayed"]) == ("applied", True)
    assert again["receipt_id"] == first["receipt_id"] and again["result"] == first["result"]


def test_the_downstream_services_registry_entry_loads(tmp_path):
    """The tool declaration its docstring tells users to copy is a valid registry entry."""
    source = (EXAMPLES / "downstream_service.py").read_text()
    entry = source.split("registry::\n\n", 1)[1].split("\n\n", 1)[0]
    registry = tmp_path / "tools.yaml"
    registry.write_text("tools:\n" + textwrap.indent(textwrap.dedent(entry), "  "))
    [tool] = load_registry(registry).tools
    assert (tool.name, tool.topic) == ("credits.grant", "effects.credits")


# sign_proposal.mjs and propose_kcat.sh

@pytest.mark.tooling
@pytest.mark.parametrize("curve", ["Ed25519", "P-256"])
def test_the_node_signer_makes_a_signature_the_intake_verifies(curve, tmp_path):
    if shutil.which("node") is None:
        pytest.skip("node is not installed")
    key = generate_signing_key("node-example", curve)
    (tmp_path / "key.jwk").write_text(json.dumps(key.as_dict(private=True)))
    principals = parse_principals(yaml.safe_dump({"principals": [{
        "id": "agent-7", "kind": "agent", "tenants": ["acme"],
        "keys": [{"kid": "node-example", "jwk": key.as_dict(private=False)}]}]}))
    value = json.dumps({"format": "generic", "note": "ünïcode bytes"}).encode()
    signed = subprocess.run(["node", example("sign_proposal.mjs"), str(tmp_path / "key.jwk"),
                             "agent-7", "acme"], input=value, capture_output=True, timeout=30)
    assert signed.returncode == 0, signed.stderr
    token = signed.stdout.strip()
    assert verify(value, token, principals).principal_id == "agent-7"
    with pytest.raises(SignatureRefused) as refused:
        verify(value.replace(b"bytes", b"BYTES"), token, principals)
    assert refused.value.code == "signature_invalid"


@infra
async def test_a_kcat_agent_signed_by_node_is_accepted_and_an_impostor_refused(endpoints, pool):
    if shutil.which("kcat") is None or shutil.which("node") is None:
        pytest.skip("kcat or node is not installed (Debian/Ubuntu: apt-get install kcat nodejs)")
    honest, impostor = new_run(), new_run()
    key = str(local().key_file("globex-agent"))
    async with running_intake(endpoints):
        accepted = await run_example(endpoints, example("propose_kcat.sh"), "-k", key,
                                     "-p", "globex-agent", "-t", "globex", "-r", honest,
                                     "-o", f"{honest}:debit")
        refused = await run_example(endpoints, example("propose_kcat.sh"), "-k", key,
                                    "-p", "agent-7", "-t", "acme", "-r", impostor,
                                    "-o", f"{impostor}:debit")
    assert accepted.returncode == 0, accepted.stderr
    assert json.loads(accepted.stdout)["payload"]["outcome"] == "accepted"
    # globex's key, signing as agent-7 for acme: the key is not agent-7's
    assert json.loads(refused.stdout)["payload"]["reason_code"] == "signature_invalid"
    assert await pool.fetchval("SELECT count(*) FROM proposal_intake.logical_calls "
                               "WHERE run_id = $1", impostor) == 0
