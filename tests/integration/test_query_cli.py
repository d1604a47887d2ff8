"""The operator CLI as a person or a script runs it (``intentledger ...``), on real PostgreSQL
and Kafka: aligned columns, ``--json`` that parses, and a dead letter written by a real
consumer replayed to its topic with its original bytes and headers."""

from __future__ import annotations

import asyncio
import json
import re

import pytest
from aiokafka import AIOKafkaProducer

from intentledger.cli import main
from shared.db.schemas import migrate_service
from downstreams.wallet.main import run_wallet
from downstreams.wallet.repository import SCHEMA as WALLET
from downstreams.wallet.settings import WalletSettings
from shared.config import Settings
from tests.support.kafka import create_topic, header, read_topic, unique_topic, wait_for
from tests.support.query_rows import seed_call, seed_event, seed_run, unique

pytestmark = pytest.mark.infra


@pytest.fixture
async def cli(pool, endpoints, monkeypatch, capsys):
    """``cli(*argv)`` → (exit code, stdout, stderr), with this test's endpoints."""
    for schema in (WALLET, "projection", "query"):
        await migrate_service(pool, schema)
    monkeypatch.setenv("INTENTLEDGER_DATABASE_URL", endpoints.database_url)
    monkeypatch.setenv("INTENTLEDGER_KAFKA_BOOTSTRAP", endpoints.kafka_bootstrap)

    async def run(*argv: str) -> tuple[int, str, str]:
        code = await asyncio.to_thread(main, list(argv))
        out, err = capsys.readouterr()
        return code, out, err
    return run


def columns_align(table: str) -> bool:
    """Every row's cells start where the header's names start."""
    header_line, *rows = table.splitlines()
    starts = [m.start() for m in re.finditer(r"(?<=  )\S|^\S", header_line)]
    return all(all(row[s - 2:s] == "  " or s == 0 for s in starts if s < len(row)) for row in rows)


async def test_runs_list_prints_aligned_columns_and_json(pool, cli):
    tenant = unique("acme")
    runs = sorted([(await seed_run(pool, tenant, status=status)).run_id
                   for status in ("RUNNING", "COMPLETED", "RUNNING")])
    code, out, _ = await cli("runs", "list", "--tenant", tenant)
    assert code == 0 and out.splitlines()[0].split()[:4] == ["RUN_ID", "TENANT_ID", "PRINCIPAL_ID", "STATUS"]
    assert [line.split()[0] for line in out.splitlines()[1:]] == runs and columns_align(out)
    code, out, _ = await cli("runs", "list", "--tenant", tenant, "--state", "RUNNING", "--json")
    listed = json.loads(out)
    assert code == 0 and listed["next"] is None
    assert [run["status"] for run in listed["items"]] == ["RUNNING", "RUNNING"]
    code, out, _ = await cli("runs", "list", "--tenant", tenant, "--limit", "2")
    cursor = out.split("more: --after ")[1].strip()
    code, out, _ = await cli("runs", "list", "--tenant", tenant, "--after", cursor, "--json")
    assert [run["run_id"] for run in json.loads(out)["items"]] == runs[2:]


async def test_runs_show_answers_who_under_which_policy_worker_fence_attempt_and_receipt(pool, cli):
    run = await seed_run(pool, unique("acme"), principal="agent-42")
    call = await seed_call(pool, run, attempts=2)
    for event_type, attempt in (("DispatchIntentRecorded", None), ("ToolAttemptStarted", 1),
                                ("ToolOutcomeMarkedUnknown", 1), ("ToolEffectReconciled", 2)):
        await seed_event(pool, run, event_type, call=call, attempt=attempt)
    code, out, _ = await cli("runs", "show", run.run_id, "--tenant", run.tenant, "--json")
    shown = json.loads(out)
    assert code == 0 and shown["run"]["principal_id"] == "agent-42"
    assert [c["logical_call_id"] for c in shown["calls"]] == [str(call)]
    [debit] = shown["tools"]  # which effects may repeat, what a timeout means for this tool
    assert (debit["tool"], debit["effect"], debit["replay_safe"], debit["reconciliation"]) == (
        "wallet.debit v1", "compensatable", True, "lookup_by_key")
    reconciled = shown["timeline"][-1]
    assert (reconciled["event_type"], reconciled["principal_id"], reconciled["policy_version"],
            reconciled["worker_id"], reconciled["fence"], reconciled["attempt"],
            reconciled["receipt_id"]) == ("ToolEffectReconciled", "agent-42", "policy-v7",
                                          "worker-a", 2, 2, f"rcpt-{call}")
    code, out, _ = await cli("runs", "show", run.run_id, "--tenant", run.tenant)
    timeline = out.split("\ntimeline\n")[1]
    assert code == 0 and "\ncalls\n" in out and columns_align(timeline)
    assert [line.split()[2] for line in timeline.splitlines()[1:]] == [
        "DispatchIntentRecorded", "ToolAttemptStarted", "ToolOutcomeMarkedUnknown", "ToolEffectReconciled"]


async def test_runs_show_prints_every_call_of_a_run_larger_than_one_page(pool, cli):
    run = await seed_run(pool, unique("acme"))
    calls = [str(await seed_call(pool, run)) for _ in range(130)]
    code, out, _ = await cli("runs", "show", run.run_id, "--tenant", run.tenant, "--json")
    assert code == 0 and [c["logical_call_id"] for c in json.loads(out)["calls"]] == calls


async def test_runs_show_of_a_run_that_does_not_exist_fails(cli):
    code, _, err = await cli("runs", "show", unique("run"), "--tenant", "acme")
    assert code == 1 and "not found" in err


async def test_unknown_list_shows_the_age(pool, cli):
    tenant = unique("acme")
    call = await seed_call(pool, await seed_run(pool, tenant), state="UNKNOWN", unknown_for=125)
    code, out, _ = await cli("unknown", "list", "--tenant", tenant)
    assert code == 0 and re.search(rf"{call}.*UNKNOWN\s+2m0[5-9]s", out)
    code, out, _ = await cli("unknown", "list", "--tenant", tenant, "--json")
    (item,) = json.loads(out)["items"]
    assert item["logical_call_id"] == str(call) and 125 <= item["age_seconds"] < 185


async def test_a_dead_letter_of_a_real_consumer_is_listed_and_replayed_to_its_topic(
        pool, endpoints, cli):
    topic, run_id = unique_topic("effects.wallet"), unique("run")
    garbage, headers = b"\x00 not an effect request", [("run_id", run_id.encode()), ("x-note", b"poison")]
    await _dead_letter_through_the_wallet(pool, endpoints, topic, garbage, headers)

    code, out, _ = await cli("dlq", "list", "--schema", WALLET, "--topic", topic, "--json")
    (letter,) = json.loads(out)["items"]
    assert code == 0 and letter["replayed_at"] is None and letter["reason"]
    code, out, _ = await cli("dlq", "replay", WALLET, str(letter["id"]))
    assert code == 0 and topic in out

    original, replayed = await read_topic(endpoints.kafka_bootstrap, topic, until=2, timeout=30)
    assert replayed.value == original.value == garbage
    assert replayed.headers == original.headers and header(replayed, "run_id") == run_id
    assert replayed.key == run_id.encode() and replayed.partition == original.partition
    code, out, _ = await cli("dlq", "list", "--schema", WALLET, "--topic", topic, "--json")
    assert code == 0 and json.loads(out)["items"][0]["replayed_at"] is not None
    code, out, _ = await cli("dlq", "list", "--schema", WALLET, "--topic", topic)
    assert code == 0 and str(letter["id"]) in out and columns_align(out)

    code, _, err = await cli("dlq", "replay", WALLET, str(letter["id"]))
    assert code == 1 and "was replayed at" in err
    assert (await cli("dlq", "replay", WALLET, str(letter["id"]), "--force"))[0] == 0
    assert len(await read_topic(endpoints.kafka_bootstrap, topic, until=3, timeout=30)) == 3


async def test_replaying_a_dead_letter_that_does_not_exist_fails(cli):
    code, _, err = await cli("dlq", "replay", WALLET, "999999999999")
    assert code == 1 and "not found" in err


async def _dead_letter_through_the_wallet(pool, endpoints, topic: str, value: bytes, headers) -> None:
    """Publish a record the wallet cannot decode; wait until the wallet has dead-lettered it."""
    await create_topic(endpoints.kafka_bootstrap, topic)
    producer = AIOKafkaProducer(bootstrap_servers=endpoints.kafka_bootstrap, acks="all")
    await producer.start()
    try:
        await producer.send_and_wait(topic, value, headers=headers)
    finally:
        await producer.stop()
    settings = Settings(kafka_bootstrap=endpoints.kafka_bootstrap, database_url=endpoints.database_url)
    stopping = asyncio.Event()
    wallet = asyncio.create_task(run_wallet(settings, WalletSettings(
        request_topic=topic, reply_topic=unique_topic("effects.receipts")), stopping))

    async def dead_lettered() -> bool:
        if wallet.done():
            wallet.result()  # a wallet that died says why
        return await pool.fetchval(f"SELECT count(*) FROM {WALLET}.dead_letters WHERE topic = $1",
                                   topic) == 1
    try:
        assert await wait_for(dead_lettered, timeout=60), "the wallet never dead-lettered the record"
    finally:
        stopping.set()
        await wallet


async def test_runs_show_names_a_run_by_its_tenant_and_id(pool, cli, capsys):
    """Two tenants may each have a run of one id: the operator says whose."""
    run = await seed_run(pool, unique("acme"))
    await seed_run(pool, unique("globex"), run_id=run.run_id, principal="someone-else")
    code, out, _ = await cli("runs", "show", run.run_id, "--tenant", run.tenant, "--json")
    assert code == 0
    assert (json.loads(out)["run"]["tenant_id"], json.loads(out)["run"]["principal_id"]) == (
        run.tenant, run.principal)
    with pytest.raises(SystemExit) as refused:  # argparse: the option is required
        await cli("runs", "show", run.run_id)
    assert refused.value.code == 2 and "--tenant" in capsys.readouterr().err
