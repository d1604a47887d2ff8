"""The whole pipeline on the authorizing broker, every service a real process logged in as its
own SCRAM user with only the ACLs derived from the topology: the intake, policy, dispatcher,
relay, projection and the reference wallet (``intentledger serve``, as the fault protocols run
them). A tenant's signed proposal is answered and settles with one debit, and its agent reads
the answers on its own results topic, which another tenant's agent may not read; a record its
agent signs while claiming the other tenant is refused by the intake and debits nothing.

If a service lacked an ACL it needs, nothing would settle: so the happy path also proves the
derived ACLs sufficient, as ``test_tenant_isolation.py`` proves them tight."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import uuid

import pytest
from aiokafka import AIOKafkaConsumer
from aiokafka.errors import TopicAuthorizationFailedError

from intentledger.chaos.stack import Stack
from shared.db.pool import open_pool
from shared.db.schemas import migrate_all
from shared.config import Settings
from shared.identity.signatures import HEADER
from shared.infra.kafka_credentials import ADMIN
from shared.kafka_users import agent_user
from shared.topology import AGENT_PROPOSALS, results_topic
from tests.support.identities import local, signature
from tests.support.intake import generic, new_run
from downstreams.wallet.repository import open_wallet
from tests.support.secure_kafka import refused
from tests.support.wallet import balance, debits

pytestmark = pytest.mark.infra
SERVICES = ("relay", "proposal-intake", "policy", "dispatcher", "projection", "wallet")
AGENT, TENANT, OTHER = "agent-7", "acme", "globex"  # agent-7 acts for acme only
SETTLED = "ToolCallSettled"


@pytest.fixture(scope="module")
async def stack(secure_kafka):
    settings = Settings(kafka_bootstrap=secure_kafka.bootstrap,
                        database_url=secure_kafka.endpoints.database_url)
    await migrate_all(settings)
    stack = Stack(secure_kafka.endpoints, secure_kafka.settings.logs_dir, "secure-pipeline")
    try:
        for service in SERVICES:  # one at a time: seven JVM-free processes, but two cores
            await stack.start(service, secure_kafka.env(service))
        yield stack
    finally:
        await stack.stop()


@pytest.fixture(scope="module")
async def secure_pool(secure_kafka):
    pool = await open_pool(secure_kafka.endpoints.database_url, application_name="secure-tests")
    yield pool
    await pool.close()


async def new_wallet(pool, tenant: str) -> str:
    wallet_id = f"tenant/{tenant}/w-{uuid.uuid4().hex[:10]}"
    assert await open_wallet(pool, wallet_id, "EUR", 10_000)
    return wallet_id


def of_run(run: str, event_type: str | None = None):
    def found(records) -> bool:
        return any(envelope.get("run_id") == run and event_type in (None, envelope.get("event_type"))
                   for envelope in map(_envelope, records))
    return found


def _envelope(record) -> dict:
    try:
        value = json.loads(record.value or b"")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def propose_as_the_tenants_agent(secure_kafka, run: str, wallet_id: str) -> dict:
    """``intentledger propose``: the SDK in a process of its own, logged in as acme's agent."""
    env = {**os.environ, **secure_kafka.env(agent_user(TENANT)),
           "INTENTLEDGER_HOME": str(secure_kafka.settings.home)}  # the CLI reads its endpoints
    done = subprocess.run(
        [sys.executable, "-m", "intentledger.cli", "propose", "--run", run, "--principal", AGENT,
         "--tenant", TENANT, "--tool", "wallet.debit", "--call-id", "c1", "--key", f"{run}:debit",
         "--args", json.dumps({"wallet_id": wallet_id, "amount": "40.00", "currency": "EUR"}),
         "--signing-key", str(local().key_file(AGENT)), "--timeout", "90"],
        env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout)


async def test_a_tenants_proposal_settles_once_and_only_its_agents_read_the_answers(
        secure_kafka, stack, secure_pool):
    wallet_id, run = await new_wallet(secure_pool, TENANT), new_run()

    outcome = await asyncio.to_thread(propose_as_the_tenants_agent, secure_kafka, run, wallet_id)
    assert outcome["status"] == "accepted"

    answers = await secure_kafka.read(results_topic(TENANT), agent_user(TENANT),
                                      until=of_run(run, SETTLED), timeout_s=90)
    assert of_run(run, SETTLED)(answers), "the agent reads its call's settlement"
    assert (await balance(secure_pool, wallet_id), await debits(secure_pool, wallet_id)) == (6_000, 1)

    await refused(AIOKafkaConsumer(results_topic(TENANT), **secure_kafka.login(agent_user(OTHER)),
                                   group_id=None, auto_offset_reset="earliest"),
                  TopicAuthorizationFailedError)
    assert not of_run(run)(await secure_kafka.read(results_topic(OTHER), ADMIN, until=of_run(run),
                                                   timeout_s=2))


@pytest.mark.parametrize(("signed_for", "reason"), [
    (TENANT, "signature_tenant_mismatch"),  # signed for acme, the body names globex
    (OTHER, "tenant_not_allowed_for_principal"),  # signed for globex, not its tenant
])
async def test_a_record_the_agent_signs_claiming_another_tenant_is_refused_and_debits_nothing(
        secure_kafka, stack, secure_pool, signed_for, reason):
    wallet_id, run = await new_wallet(secure_pool, OTHER), new_run()
    body = generic(run, "c1", tenant=OTHER, principal_id=AGENT, operation_key="debit",
                   arguments={"wallet_id": wallet_id, "amount": "40.00", "currency": "EUR"})
    value = json.dumps(body).encode()
    async with secure_kafka.producer(agent_user(TENANT), acks="all") as producer:
        await producer.send_and_wait(AGENT_PROPOSALS, value, key=run.encode(), headers=[
            (HEADER, signature(value, AGENT, signed_for))])

    answered = await secure_kafka.read(results_topic(OTHER), ADMIN, until=of_run(run),
                                       timeout_s=60)
    [answer] = [e for e in map(_envelope, answered) if e.get("run_id") == run]
    assert (answer["payload"]["outcome"], answer["payload"]["reason_code"]) == ("rejected", reason)
    accepted = await secure_pool.fetchval(
        "SELECT count(*) FROM proposal_intake.logical_calls WHERE run_id = $1", run)
    assert accepted == 0
    assert (await balance(secure_pool, wallet_id), await debits(secure_pool, wallet_id)) == (10_000, 0)
