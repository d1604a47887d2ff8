"""Answers only to their tenant, on the real intake, relay and Kafka: a tenant's answers are on
its own topic ``agent.results.<tenant>`` and nowhere else, a new tenant's topic is created by the
relay with the family's partitions, and the SDK reads exactly its run's partition of it, even
when the topic appeared only after the SDK started."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import uuid

import pytest
from aiokafka import AIOKafkaProducer, TopicPartition
from aiokafka.errors import KafkaError
from intentledger_client import Client

from shared.identity.signatures import HEADER, sign
from shared.messaging.admin import ensure_results_topics
from intentledger_client.topics import partition_for
from shared.topology import AGENT_PROPOSALS, RESULTS_PARTITIONS, results_topic
from tests.support.identities import local
from tests.support.intake import answers, generic, new_run, running_intake, send
from tests.support.kafka import partition_count, read_topic, topic_exists

pytestmark = pytest.mark.infra
SIGNER = "user-42"  # may act for any tenant, so each test can use tenants no other test has
DEBIT = {"wallet_id": "w-1", "amount": "12.50", "currency": "EUR"}


def fresh_tenant() -> str:
    return f"t-{uuid.uuid4().hex[:10]}"


def client(endpoints, tenant: str) -> Client:
    return Client(endpoints.kafka_bootstrap, principal_id=SIGNER, tenant_id=tenant,
                  signing_key=local().signing_key(SIGNER))


async def test_a_tenants_answer_is_on_its_topic_and_nothing_of_it_on_anothers(endpoints):
    a, b = fresh_tenant(), fresh_tenant()
    run_a, run_b = new_run(), new_run()
    async with running_intake(endpoints):
        async with client(endpoints, a) as agent_a, client(endpoints, b) as agent_b:
            mine = await agent_a.call(run_a, "wallet.debit", DEBIT, call_id="c1",
                                      operation_key=f"{run_a}:secret-order", settle=False)
            theirs = await agent_b.call(run_b, "wallet.debit", DEBIT, call_id="c1",
                                        operation_key=f"{run_b}:k", settle=False)
    assert (mine.ledger_status, theirs.ledger_status) == ("accepted", "accepted")
    on_b = await read_topic(endpoints.kafka_bootstrap, results_topic(b), until=10**6, timeout=3)
    assert on_b, "b's own answer is on b's topic"
    leaked = [r.value for r in on_b if run_a.encode() in r.value or a.encode() in r.value
              or b"secret-order" in r.value]
    assert leaked == []
    on_a = await read_topic(endpoints.kafka_bootstrap, results_topic(a), until=10**6, timeout=3)
    assert {json.loads(r.value)["run_id"] for r in on_a} == {run_a}


async def test_an_sdk_started_before_its_tenants_topic_existed_still_gets_its_answer(endpoints):
    tenant, run = fresh_tenant(), new_run()
    topic = results_topic(tenant)
    async with client(endpoints, tenant) as agent:
        assert not await topic_exists(endpoints.kafka_bootstrap, topic)
        async with running_intake(endpoints):
            outcome = await agent.call(run, "wallet.debit", DEBIT, call_id="c1",
                                       operation_key=f"{run}:first", wait=60, settle=False)
        read = agent.partitions
    assert outcome.ledger_status == "accepted"
    assert read == {TopicPartition(topic, partition_for(run.encode(), range(RESULTS_PARTITIONS)))}
    # The relay made it, with the family's partitions (not the broker's default of one).
    assert await partition_count(endpoints.kafka_bootstrap, topic) == RESULTS_PARTITIONS


async def test_the_sdk_reads_exactly_its_runs_partition_of_its_tenants_topic(endpoints):
    tenant = fresh_tenant()
    runs = [new_run() for _ in range(12)]
    async with running_intake(endpoints):
        for run in runs:
            async with client(endpoints, tenant) as agent:
                outcome = await agent.call(run, "wallet.debit", DEBIT, call_id="c1",
                                           operation_key=f"{run}:k", wait=60, settle=False)
                assignment = agent.partitions
            assert outcome.ledger_status == "accepted"
            topic = results_topic(tenant)
            [partition] = assignment
            assert partition.topic == topic
            assert partition.partition == partition_for(run.encode(), range(RESULTS_PARTITIONS))
    records = await read_topic(endpoints.kafka_bootstrap, topic, until=len(runs), timeout=10)
    # the relay put each run's answer in the partition the SDK read
    assert {(json.loads(r.value)["run_id"], r.partition) for r in records} == {
        (run, partition_for(run.encode(), range(RESULTS_PARTITIONS))) for run in runs}
    assert len({r.partition for r in records}) > 1  # the runs really are spread


async def test_a_record_claiming_another_tenant_is_answered_only_on_the_claimed_tenants_topic(
        endpoints):
    """A sender signing for one tenant while its body names another is refused; the answer
    carries only its own content and goes to the tenant it named, never to its own topic."""
    victim, liar, run = fresh_tenant(), fresh_tenant(), new_run()
    async with running_intake(endpoints):
        await send(endpoints.kafka_bootstrap, generic(run, "c1", tenant=victim),
                   signer=(SIGNER, liar))
        [answer] = await answers(endpoints.kafka_bootstrap, run, 1, tenant=victim)
    payload = answer["payload"]
    assert (payload["outcome"], payload["reason_code"]) == ("rejected",
                                                           "signature_tenant_mismatch")
    assert payload["tenant_id"] is None and payload["principal_id"] is None
    assert not await topic_exists(endpoints.kafka_bootstrap, results_topic(liar))


async def test_a_refused_signature_is_answered_with_its_code_not_the_key_owners_name(endpoints):
    """The verifier's detail names the principal that owns the key a record names: another
    tenant's, when a sender borrows its key id. The answer says why, never whose."""
    tenant, run = fresh_tenant(), new_run()
    value = json.dumps(generic(run, "c1", tenant=tenant)).encode()
    forged = sign(value, local().signing_key("globex-agent"), principal_id=SIGNER,
                  tenant_id=tenant)
    async with running_intake(endpoints):
        producer = AIOKafkaProducer(bootstrap_servers=endpoints.kafka_bootstrap)
        await producer.start()
        try:
            await producer.send_and_wait(AGENT_PROPOSALS, value, key=b"agent",
                                         headers=[(HEADER, forged.encode())])
        finally:
            await producer.stop()
        [answer] = await answers(endpoints.kafka_bootstrap, run, 1, tenant=tenant)
    payload = answer["payload"]
    assert (payload["outcome"], payload["reason_code"]) == ("rejected", "signature_invalid")
    assert "globex" not in json.dumps(payload)


async def test_a_record_naming_no_valid_tenant_is_dead_lettered_and_answered_nowhere(endpoints):
    run = new_run()
    async with running_intake(endpoints) as intake:
        await send(endpoints.kafka_bootstrap, generic(run, "c1", tenant="Acme.EU"), signed=False)
        await send(endpoints.kafka_bootstrap, generic(new_run(), "c-after"))
        assert await answers(endpoints.kafka_bootstrap, run, 1, timeout=5) == []
    [letter] = [d for d in intake.totals.dead_lettered if "invalid_tenant_id" in str(d)]
    assert letter


async def test_an_operator_adds_a_tenants_topic_ahead_of_its_first_answer(endpoints):
    tenant = fresh_tenant()
    env = {**os.environ, "INTENTLEDGER_KAFKA_BOOTSTRAP": endpoints.kafka_bootstrap,
           "INTENTLEDGER_DATABASE_URL": endpoints.database_url}

    def cli(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "intentledger.cli", "tenants", "add", *args],
                              env=env, capture_output=True, text=True, timeout=60)

    first = await asyncio.to_thread(cli, tenant)
    again = await asyncio.to_thread(cli, tenant)
    bad = await asyncio.to_thread(cli, "Acme.EU")
    assert (first.returncode, first.stdout) == (0, f"{results_topic(tenant)}: created\n")
    assert (again.returncode, again.stdout) == (0, f"{results_topic(tenant)}: exists\n")
    assert bad.returncode == 2 and "'Acme.EU'" in bad.stderr
    assert await partition_count(endpoints.kafka_bootstrap, results_topic(tenant)) == \
        RESULTS_PARTITIONS


async def test_a_topic_the_broker_refuses_to_create_is_an_error_not_a_creation(endpoints):
    """As a secure broker refuses a relay without Create: here, three replicas on one broker."""
    topic = results_topic(fresh_tenant())
    with pytest.raises(KafkaError, match=topic):
        await ensure_results_topics(endpoints.kafka_bootstrap, [topic], replication=3)
    assert not await topic_exists(endpoints.kafka_bootstrap, topic)
