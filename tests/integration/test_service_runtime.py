"""The service runtime on real processes: every ``intentledger serve`` target answers
``/healthz`` and ``/readyz`` with the checks its deployment relies on (the query API without any
Kafka), and a consumer sent SIGTERM in the middle of a batch finishes it, commits its offsets and
exits 0, so that after a restart every record has been applied exactly once."""

from __future__ import annotations

import asyncio
import json
import re
import signal
import uuid

import aiohttp
import pytest

from shared.db.schemas import migrate_service
from downstreams.wallet.repository import SCHEMA as WALLET
from tests.integration.test_wallet import WalletRun, request, send
from shared.infra.postgres_local import login_url
from tests.support.dispatch import Stage, dispatcher_stage
from tests.support.ports import free_port
from tests.support.identities import local
from tests.support.kafka import committed, create_topic, unique_topic, wait_for
from tests.support.probe import Probe
from tests.support.processes import ServiceProcess, relay_env
from tests.support.wallet import balance, debit, new_key, new_wallet

pytestmark = pytest.mark.infra

CONSUMER_READINESS = {"postgres", "migrations", "kafka", "partitions"}


async def probe(port: int, path: str) -> tuple[int, dict] | None:
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5)) as session, \
                session.get(f"http://127.0.0.1:{port}{path}") as response:
            return response.status, await response.json()
    except aiohttp.ClientError:
        return None  # not listening yet


async def ready(port: int, timeout: float = 60.0) -> tuple[int, dict] | None:
    async def answered():
        answer = await probe(port, "/readyz")
        return answer if answer and answer[0] == 200 else None
    return await wait_for(answered, timeout=timeout, interval=0.5)


def environments(stage: Stage, relay_schema: str) -> dict[str, dict[str, str]]:
    """Each service on this test's own topics and files, so it touches no other test's work."""
    return {
        "relay": relay_env(relay_schema),
        "proposal-intake": {"INTENTLEDGER_INTAKE_TOOLS_FILE": str(stage.tools_file),
                            "INTENTLEDGER_INTAKE_PROPOSALS_TOPIC": stage.proposals,
                            "INTENTLEDGER_INTAKE_RESULTS_FAMILY": stage.results,
                            "INTENTLEDGER_INTAKE_INTAKE_TOPIC": stage.intake},
        "policy": {"INTENTLEDGER_POLICY_POLICY_FILE": str(stage.policy_file),
                   "INTENTLEDGER_POLICY_TOOLS_FILE": str(stage.tools_file),
                   "INTENTLEDGER_POLICY_INTAKE_TOPIC": stage.intake,
                   "INTENTLEDGER_POLICY_APPROVALS_TOPIC": stage.approvals,
                   "INTENTLEDGER_POLICY_AUTHORIZATIONS_TOPIC": stage.authorizations,
                   "INTENTLEDGER_POLICY_RESULTS_FAMILY": stage.results},
        "dispatcher": stage.dispatcher_env(),
        "projection": {"INTENTLEDGER_PROJECTION_INTAKE_TOPIC": stage.intake,
                       "INTENTLEDGER_PROJECTION_AUTHORIZATIONS_TOPIC": stage.authorizations,
                       "INTENTLEDGER_PROJECTION_DISPATCH_TOPIC": stage.dispatch,
                       "INTENTLEDGER_PROJECTION_EFFECTS_TOPIC": stage.effects},
        "wallet": {"INTENTLEDGER_WALLET_REQUEST_TOPIC": stage.wallet_topic,
                   "INTENTLEDGER_WALLET_REPLY_TOPIC": stage.receipts},
        "warehouse": {"INTENTLEDGER_WAREHOUSE_REQUEST_TOPIC": stage.warehouse_topic,
                      "INTENTLEDGER_WAREHOUSE_REPLY_TOPIC": stage.receipts},
        # No Kafka at all (as in Kubernetes, where no network policy lets it reach one), and
        # its own login, which row-level security binds (it refuses the superuser).
        "query": {"INTENTLEDGER_QUERY_PORT": "0", "INTENTLEDGER_KAFKA_BOOTSTRAP": "127.0.0.1:9",
                  "INTENTLEDGER_DATABASE_URL": login_url(stage.endpoints.database_url)},
        # No database at all: its ledger clients open per caller, on first use.
        "mcp-gateway": {"INTENTLEDGER_MCP_GATEWAY_PORT": "0",
                        "INTENTLEDGER_MCP_GATEWAY_TOOLS_FILE": str(stage.tools_file),
                        "INTENTLEDGER_MCP_GATEWAY_POLICY_FILE": str(stage.policy_file),
                        "INTENTLEDGER_MCP_GATEWAY_PRINCIPALS_FILE": str(local().principals_file),
                        "INTENTLEDGER_SIGNING_KEY_FILE": str(local().key_file("mcp-gateway")),
                        "INTENTLEDGER_DATABASE_URL": ""},
    }


EXPECTED = {
    # service: (readiness checks, liveness checks)
    "relay": ({"postgres", "migrations", "kafka"}, {"workers"}),
    "proposal-intake": (CONSUMER_READINESS, {"consumer", "background"}),
    "policy": (CONSUMER_READINESS, {"consumer", "background"}),
    "dispatcher": (CONSUMER_READINESS, {"consumer", "background"}),
    "projection": (CONSUMER_READINESS, {"consumer"}),
    "wallet": (CONSUMER_READINESS, {"consumer", "background"}),  # forgets keys
    "warehouse": (CONSUMER_READINESS, {"consumer"}),
    "query": ({"postgres", "migrations"}, set()),
    "mcp-gateway": ({"serving"}, set()),
}


async def test_every_service_answers_its_probes_and_stops_cleanly(pool, endpoints, tmp_path):
    from tests.support.deployment import cli_grammar

    assert set(EXPECTED) == set(cli_grammar().serve_choices)
    probe_topic = unique_topic()
    await create_topic(endpoints.kafka_bootstrap, probe_topic)
    relay_schema = (await Probe(pool, probe_topic).create()).schema
    async with dispatcher_stage(pool, endpoints, tmp_path) as stage:
        await stage.create_topics(pipeline=True)
        for service, env in environments(stage, relay_schema).items():
            port = free_port()
            process = ServiceProcess(service, endpoints, tmp_path / f"{service}.log",
                                     env={**env, "INTENTLEDGER_HEALTH_PORT": str(port)}).start()
            try:
                answer = await ready(port)
                assert answer is not None, f"{service} never ready: {await probe(port, '/readyz')}"
                readiness, liveness = EXPECTED[service]
                assert answer[1] == {"service": service, "status": "ready",
                                     "checks": dict.fromkeys(readiness, "ok")}
                assert await probe(port, "/healthz") == (200, {
                    "service": service, "status": "alive", "checks": dict.fromkeys(liveness, "ok")})
            finally:
                assert await asyncio.to_thread(process.stop) == 0, f"{service}: see {process.log_path}"
            configuration = next(line["msg"] for line in process.log_lines()
                                 if line["msg"].startswith(f"{service} configuration "))
            shown = json.loads(configuration.removeprefix(f"{service} configuration "))
            assert shown["INTENTLEDGER_HEALTH_PORT"] == port
            assert shown["INTENTLEDGER_CAPABILITY_PUBLIC_KEYS_FILE"]  # named, never defaulted


async def test_sigterm_mid_batch_finishes_the_batch_and_a_restart_applies_the_rest_once(
        pool, endpoints, tmp_path):
    await migrate_service(pool, WALLET)
    run = WalletRun(unique_topic("effects.wallet"), unique_topic("effects.receipts"))
    for topic in (run.request_topic, run.reply_topic):
        await create_topic(endpoints.kafka_bootstrap, topic, partitions=1)  # batches in order
    wallet, keys = await new_wallet(pool, 1_000_000), [new_key() for _ in range(40)]
    run_id = f"run-{uuid.uuid4().hex[:8]}"
    await send(endpoints.kafka_bootstrap, run.request_topic,
               *[request(run, key, debit(wallet, 100), run_id=run_id) for key in keys])
    env = {"INTENTLEDGER_WALLET_REQUEST_TOPIC": run.request_topic,
           "INTENTLEDGER_WALLET_REPLY_TOPIC": run.reply_topic, "INTENTLEDGER_WALLET_BATCH_SIZE": "10"}
    log = tmp_path / "wallet.log"

    # Each debit of a batch of 10 waits 0.2 s inside the batch's transaction: SIGTERM lands in it.
    first = ServiceProcess("wallet", endpoints, log, faults="wallet.delay=delay:0.2", env=env).start()
    assert await wait_for(lambda: _fired(log, 2), timeout=60), f"no batch started; see {log}"
    first.process.send_signal(signal.SIGTERM)
    assert await asyncio.to_thread(first.wait_exit, 30) == 0
    applied = await _debits(pool, keys)
    assert applied == 10, "the batch in flight was finished, and no other one started"
    assert await committed(endpoints.kafka_bootstrap, "wallet", run.request_topic, 1) == applied
    assert _totals(first) == (10, 0)

    second = ServiceProcess("wallet", endpoints, log, env=env).start()
    try:
        assert await wait_for(lambda: _all_applied(pool, keys), timeout=60)
    finally:
        assert await asyncio.to_thread(second.stop) == 0
    assert _totals(second) == (30, 0), "nothing committed was delivered again"
    assert await committed(endpoints.kafka_bootstrap, "wallet", run.request_topic, 1) == 40
    per_key = await pool.fetch(f"SELECT operation_key, count(*) AS n FROM {WALLET}.debits "
                               "WHERE operation_key = ANY($1) GROUP BY operation_key", keys)
    assert sorted(row["operation_key"] for row in per_key) == sorted(keys)
    assert {row["n"] for row in per_key} == {1}
    receipts = await pool.fetch(f"SELECT envelope->'payload'->>'operation_key' AS key "
                                f"FROM {WALLET}.outbox WHERE envelope->'payload'->>'operation_key' "
                                "= ANY($1)", keys)
    assert sorted(row["key"] for row in receipts) == sorted(keys), "one receipt per debit"
    assert await balance(pool, wallet) == 1_000_000 - 40 * 100


async def _fired(log, times: int) -> bool:
    return log.read_text(errors="replace").count("fault injected: wallet.delay") >= times


async def _debits(pool, keys: list[str]) -> int:
    return await pool.fetchval(f"SELECT count(*) FROM {WALLET}.debits WHERE operation_key = ANY($1)",
                               keys)


async def _all_applied(pool, keys: list[str]) -> bool:
    return await _debits(pool, keys) == len(keys)


def _totals(process: ServiceProcess) -> tuple[int, int]:
    """(applied, duplicates) the process reported when it stopped."""
    stopped = [line["msg"] for line in process.log_lines() if "wallet stopped:" in line["msg"]]
    applied, duplicates = re.search(r"applied=(\d+), duplicates=(\d+)", stopped[-1]).groups()
    return int(applied), int(duplicates)
