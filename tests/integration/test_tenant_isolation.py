"""Tenant isolation on a real authorizing broker (``infra up --secure``): real aiokafka clients
log in with a tenant's SCRAM credentials and the broker itself refuses what the tenant's ACLs do
not allow. Each refusal is checked to be the broker's (an authorization error, or a record that
exists and is never delivered), next to a positive control showing that the same login does
what it may: the refusals are not a broken setup."""

from __future__ import annotations

import logging
import uuid

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewPartitions, NewTopic
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
from aiokafka.errors import (GroupAuthorizationFailedError, KafkaConnectionError,
                             TopicAuthorizationFailedError)

from shared import topology
from shared.infra.kafka_credentials import ADMIN
from shared.infra.kafka_tools import bindings
from shared.kafka_users import agent_user
from shared.messaging.admin import controller_known, ensure_topics
from shared.topology import results_topic
from tests.support.secure_kafka import refused

pytestmark = pytest.mark.infra
ACME, GLOBEX = agent_user("acme"), agent_user("globex")
INTERNAL = (topology.LEDGER_INTAKE, topology.LEDGER_AUTHORIZATIONS, topology.LEDGER_APPROVALS,
            topology.LEDGER_RESOLUTIONS, topology.LEDGER_DISPATCH, topology.LEDGER_EFFECTS,
            topology.LEDGER_COMPENSATIONS, topology.EFFECTS_WALLET, topology.EFFECT_RECEIPTS)


def marker() -> bytes:
    return f"isolation-{uuid.uuid4().hex}".encode()


def carrying(value: bytes):
    return lambda records: any(record.value == value for record in records)


async def test_a_tenant_writes_proposals_and_withdrawals_and_reads_its_own_answers(secure_kafka):
    """Withdrawals of its own calls go on ``ledger.approvals`` (``Client.withdraw``), which it
    may write and not read: nobody's approvals are the tenant's to see, and the policy counts
    an approval only from an approver's key (``principal_lacks_role`` for an agent's own)."""
    answer, proposal, withdrawal = marker(), marker(), marker()
    async with secure_kafka.producer(ADMIN) as producer:  # an answer, as the relay publishes one
        await producer.send_and_wait(results_topic("acme"), answer)
    async with secure_kafka.producer(ACME) as producer:
        await producer.send_and_wait(topology.AGENT_PROPOSALS, proposal)
        await producer.send_and_wait(topology.LEDGER_APPROVALS, withdrawal)

    mine = await secure_kafka.read(results_topic("acme"), ACME, until=carrying(answer))
    proposed = await secure_kafka.read(topology.AGENT_PROPOSALS, ADMIN, until=carrying(proposal))
    withdrawn = await secure_kafka.read(topology.LEDGER_APPROVALS, ADMIN,
                                        until=carrying(withdrawal))

    assert carrying(answer)(mine) and carrying(proposal)(proposed)
    assert carrying(withdrawal)(withdrawn)


async def test_a_tenant_never_receives_another_tenants_answers(secure_kafka):
    theirs = marker()
    async with secure_kafka.producer(ADMIN) as producer:
        await producer.send_and_wait(results_topic("globex"), theirs)
    assert carrying(theirs)(await secure_kafka.read(results_topic("globex"), GLOBEX,
                                                    until=carrying(theirs)))

    assigned = await secure_kafka.read(results_topic("globex"), ACME, until=carrying(theirs),
                                       timeout_s=4)
    assert assigned == []  # fetches refused: the record exists, and is never delivered
    await refused(AIOKafkaConsumer(results_topic("globex"), **secure_kafka.login(ACME),
                                   group_id=None, auto_offset_reset="earliest"),
                  TopicAuthorizationFailedError)


async def test_a_tenant_never_reads_the_proposals_other_tenants_send(secure_kafka):
    """It writes proposals; reading them would show every tenant's calls and arguments."""
    theirs = marker()
    async with secure_kafka.producer(GLOBEX) as producer:
        await producer.send_and_wait(topology.AGENT_PROPOSALS, theirs)

    with pytest.raises(TopicAuthorizationFailedError):  # it may Describe it (to produce), not Read
        await secure_kafka.read(topology.AGENT_PROPOSALS, ACME, until=carrying(theirs))
    assert carrying(theirs)(await secure_kafka.read(topology.AGENT_PROPOSALS, "proposal-intake",
                                                    until=carrying(theirs)))


async def test_a_literal_acl_does_not_reach_a_tenant_whose_name_extends_it(secure_kafka):
    """``agent.results.acme2`` belongs to another tenant: a PREFIXED ACL would have let acme in."""
    lookalike, theirs = results_topic(f"acme{uuid.uuid4().hex[:4]}"), marker()
    await ensure_topics(secure_kafka.bootstrap, [lookalike], 1, login=secure_kafka.login(ADMIN))
    async with secure_kafka.producer(ADMIN) as producer:
        await producer.send_and_wait(lookalike, theirs)

    assert await secure_kafka.read(lookalike, ACME, until=carrying(theirs), timeout_s=4) == []


@pytest.mark.parametrize("topic", [*(t for t in INTERNAL if t != topology.LEDGER_APPROVALS),
                                   results_topic("acme"), results_topic("globex")])
async def test_a_tenant_cannot_write_any_topic_but_proposals_and_withdrawals(secure_kafka, topic):
    """Its own results topic too: an agent must not forge the answers it is given."""
    forged = marker()
    async with secure_kafka.producer(ACME) as producer:
        with pytest.raises(TopicAuthorizationFailedError):
            await producer.send_and_wait(topic, forged)
    assert not carrying(forged)(await secure_kafka.read(topic, ADMIN, until=carrying(forged),
                                                        timeout_s=2))


@pytest.mark.parametrize("topic", INTERNAL)
async def test_a_tenant_cannot_read_the_ledger_every_tenants_intents_travel_on(secure_kafka, topic):
    async with secure_kafka.producer(ADMIN) as producer:
        await producer.send_and_wait(topic, there := marker())
    try:
        seen = await secure_kafka.read(topic, ACME, until=carrying(there), timeout_s=3)
    except TopicAuthorizationFailedError:  # one it writes (so may Describe): refused at the fetch
        seen = []
    assert seen == []
    await refused(AIOKafkaConsumer(topic, **secure_kafka.login(ACME), group_id=None,
                                   auto_offset_reset="earliest"), TopicAuthorizationFailedError)


async def test_a_tenant_cannot_delete_grow_or_reconfigure_any_topic(secure_kafka):
    """Not even its own results topic: deleting it would lose the answers it is owed."""
    own, proposals = results_topic("acme"), topology.AGENT_PROPOSALS
    admin = AIOKafkaAdminClient(**secure_kafka.login(ACME))
    await admin.start()
    try:
        deleted = await admin.delete_topics([own, proposals])
        with pytest.raises(TopicAuthorizationFailedError):
            await admin.create_partitions({own: NewPartitions(16)})
        [altered] = await admin.alter_configs([ConfigResource(
            ConfigResourceType.TOPIC, own, {"retention.ms": "1"})])
    finally:
        await admin.close()
    denied = TopicAuthorizationFailedError.errno
    assert [error for _, error, *_ in deleted.topic_error_codes] == [denied, denied]
    assert [resource[0] for resource in altered.resources] == [TopicAuthorizationFailedError.errno]
    admin = AIOKafkaAdminClient(**secure_kafka.login(ADMIN))
    await admin.start()
    try:
        assert {own, proposals} <= set(await admin.list_topics())
        [described] = await admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, own)])
    finally:
        await admin.close()
    retention = {entry[0]: entry[1] for entry in described.resources[0][4]}["retention.ms"]
    assert retention != "1"


@pytest.mark.parametrize("group", sorted(topology.SERVICE_GROUPS))
async def test_a_tenant_cannot_join_a_services_consumer_group(secure_kafka, group):
    """On the one topic it may read, so the refusal is the group's."""
    await refused(AIOKafkaConsumer(results_topic("acme"), **secure_kafka.login(ACME),
                                   group_id=group, auto_offset_reset="earliest"),
                  GroupAuthorizationFailedError)


async def test_a_tenant_cannot_create_a_topic(secure_kafka):
    name = results_topic(f"acme-{uuid.uuid4().hex[:6]}")
    admin = AIOKafkaAdminClient(**secure_kafka.login(ACME))
    await admin.start()
    try:
        await controller_known(admin)
        response = await admin.create_topics([NewTopic(name, 1, 1)])
    finally:
        await admin.close()
    assert [error[1] for error in response.topic_errors] == [TopicAuthorizationFailedError.errno]
    admin = AIOKafkaAdminClient(**secure_kafka.login(ADMIN))
    await admin.start()
    try:
        assert name not in await admin.list_topics()
    finally:
        await admin.close()


@pytest.mark.parametrize("login", ["wrong password", "unknown user", "no login"])
async def test_a_connection_that_does_not_authenticate_is_refused(secure_kafka, login, caplog):
    options = {"wrong password": secure_kafka.login(ACME, password="not-the-password"),
               "unknown user": {**secure_kafka.login(ACME), "sasl_plain_username": "mallory"},
               "no login": {"bootstrap_servers": secure_kafka.bootstrap}}[login]
    producer = AIOKafkaProducer(**options, request_timeout_ms=5000)
    with caplog.at_level(logging.ERROR, logger="aiokafka"), pytest.raises(KafkaConnectionError):
        await producer.start()
    await producer.stop()
    if login != "no login":
        assert "SaslAuthenticationFailed" in caplog.text


@pytest.mark.parametrize(("user", "topic"), [
    ("projection", topology.LEDGER_EFFECTS),    # it reads effects; only the relay writes them
    ("dispatcher", topology.EFFECTS_WALLET),    # its requests go through its outbox
    ("proposal-intake", results_topic("acme")),
    ("operator", topology.LEDGER_AUTHORIZATIONS),
    ("query", topology.LEDGER_APPROVALS),       # the console's form resolves, never approves
])
async def test_a_service_cannot_write_what_it_only_emits_through_its_outbox(secure_kafka, user,
                                                                             topic):
    async with secure_kafka.producer(user) as producer:
        with pytest.raises(TopicAuthorizationFailedError):
            await producer.send_and_wait(topic, marker())


@pytest.mark.parametrize(("user", "topic", "group"), [
    ("relay", topology.LEDGER_INTAKE, "relay"),           # the relay writes, never reads
    ("wallet", topology.EFFECTS_WAREHOUSE, "wallet"),     # another downstream's requests
    ("policy", topology.LEDGER_AUTHORIZATIONS, "dispatcher"),  # another service's group
    ("projection", topology.AGENT_PROPOSALS, "projection"),    # Describe for lag, not Read
])
async def test_a_service_cannot_read_what_it_does_not_consume(secure_kafka, user, topic, group):
    await refused(AIOKafkaConsumer(topic, **secure_kafka.login(user), group_id=group,
                                   auto_offset_reset="earliest"),
                  TopicAuthorizationFailedError, GroupAuthorizationFailedError)


async def test_the_broker_holds_exactly_the_acls_derived_from_the_topology(secure_kafka):
    wanted = {binding for user, acls in secure_kafka.plan.users.items()
              for binding in bindings(user, acls)}
    assert secure_kafka.tools().acls() == wanted
