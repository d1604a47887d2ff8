"""The whole pipeline on the authorizing broker, every service a real process logged in as its
own SCRAM user with only the ACLs derived from the topology: the intake, policy, dispatcher,
relay, projection and the reference wallet (``intentledger serve``, as the fault protocols run
them). A tenant's signed proposal is answered and settles with one debit, and its agent reads
the answers on its own results topic, which another tenant's agent may not read; a record its
agent signs while claiming the other tenant is refused by the intake and debits nothing.
Its agent's user may write ``ledger.approvals`` for its withdrawals: an approval of its own
call it writes there is refused, and its withdrawal, through the SDK logged in as that user,
denies the call ``call_withdrawn``.

If a service lacked an ACL it needs, nothing would settle: so the happy path also proves the
derived ACLs sufficient, as ``test_tenant_isolation.py`` proves them tight."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from aiokafka import AIOKafkaConsumer
from aiokafka.errors import TopicAuthorizationFailedError
from intentledger_client import Client

from intentledger.chaos.stack import Stack
from shared.db.pool import open_pool
from shared.db.schemas import migrate_all
from shared.config import Settings
from shared.contracts.approvals import APPROVAL_GRANTED, ApprovalDecision
from shared.identity.signatures import APPROVAL, HEADER
from shared.messaging.envelope import Envelope
from shared.infra.kafka_credentials import ADMIN
from shared.kafka_users import agent_user
from shared.topology import AGENT_PROPOSALS, LEDGER_APPROVALS, results_topic
from tests.support.identities import local, signature
from tests.support.intake import generic, new_run
from downstreams.wallet.repository import open_wallet
from tests.support.kafka import wait_for
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


async def new_wallet(pool, tenant: str, balance_minor: int = 10_000) -> str:
    wallet_id = f"tenant/{tenant}/w-{uuid.uuid4().hex[:10]}"
    assert await open_wallet(pool, wallet_id, "EUR", balance_minor)
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


async def test_the_agents_own_approval_is_refused_and_its_withdrawal_denies_the_call(
        secure_kafka, stack, secure_pool):
    """Over the example policy's cap (500.00 EUR) a debit awaits two people. The agent's user
    may write ``ledger.approvals`` (its withdrawals go there), so it writes a grant of its own
    call, signed with its own key: refused, the call still waits. Its withdrawal, sent by the
    SDK logged in as that user, denies the call; nothing is debited."""
    wallet_id, run = await new_wallet(secure_pool, TENANT, 100_000), new_run()
    login = secure_kafka.login(agent_user(TENANT))
    async with Client(login.pop("bootstrap_servers"), principal_id=AGENT, tenant_id=TENANT,
                      signing_key=local().key_file(AGENT), kafka_options=login) as client:
        waiting = await client.call(run, "wallet.debit", {"wallet_id": wallet_id,
                                                          "amount": "600.00", "currency": "EUR"},
                                    call_id="c1", operation_key=f"{run}:debit", wait=90)
        assert waiting.status == "awaiting_approval", waiting
        intent = waiting.answer
        now = datetime.now(UTC)
        own = Envelope.new(event_type=APPROVAL_GRANTED, run_id=run, producer="agent",
                           payload=ApprovalDecision(
                               decision="granted", run_id=run, tenant_id=TENANT,
                               logical_call_id=intent.logical_call_id,
                               operation_key=intent.operation_key,
                               arguments_hash=intent.arguments_hash, approver_id=AGENT,
                               decided_at=now, expires_at=now + timedelta(minutes=5),
                           ).model_dump(mode="json"))
        async with secure_kafka.producer(agent_user(TENANT), acks="all") as producer:
            await producer.send_and_wait(LEDGER_APPROVALS, own.value(), key=run.encode(), headers=[
                *((name, value.encode()) for name, value in own.headers().items()),
                (HEADER, signature(own.value(), AGENT, TENANT, use=APPROVAL))])
        refused = await wait_for(lambda: secure_pool.fetchval(
            "SELECT reason_code FROM policy.approvals WHERE approval_event_id = $1",
            own.event_id), timeout=60)
        assert refused == "principal_lacks_role", "an agent approves nothing"
        assert await secure_pool.fetchval(
            "SELECT outcome FROM policy.decisions WHERE logical_call_id = $1",
            intent.logical_call_id) == "awaiting_approval"

        withdrawn = await client.withdraw(waiting.handle, "the user cancelled", wait=90)
    assert (withdrawn.status, withdrawn.reason_code) == ("denied", "call_withdrawn")
    assert (await balance(secure_pool, wallet_id), await debits(secure_pool, wallet_id)) == (
        100_000, 0)
