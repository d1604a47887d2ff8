"""The Kafka users and ACLs derived from the topology (``shared.kafka_users``), how they are
handed to Kafka's AclCommand, and the secure broker's credentials and listeners. The broker
enforcing them is proven in ``tests/integration/test_tenant_isolation.py``; the Kubernetes
manifests holding exactly them in ``test_k8s.py``."""

from __future__ import annotations

import itertools
import stat

import pytest

from shared import topology
from shared.infra import kafka_credentials, kafka_secure, manager
from shared.infra.errors import InfraError
from shared.infra.kafka_secure import SecurePlan
from shared.infra.kafka_tools import _camel, _grouped, _upper, bindings
from shared.infra.state import InfraState
from shared.kafka_users import Acl, agent_user, kafka_users, topics

SERVED = {*topology.CONSUMER_GROUPS, topology.RELAY, topology.CONSOLE}
USERS = kafka_users(SERVED, ["effects.email"], ["acme", "globex"])


def test_a_tenants_agent_writes_proposals_and_withdrawals_and_reads_only_its_own_results():
    """Its results by literal name; withdrawals of its own calls go on ``ledger.approvals``,
    where only a signature with the ``approver`` role could approve anything."""
    assert USERS[agent_user("acme")] == tuple(sorted([
        Acl("topic", topology.AGENT_PROPOSALS, operations=("Write", "Describe")),
        Acl("topic", topology.LEDGER_APPROVALS, operations=("Write", "Describe")),
        Acl("topic", "agent.results.acme", operations=("Read", "Describe"))]))


def test_no_one_but_the_tenants_agents_reads_a_tenants_results():
    readers = {user for user, acls in USERS.items() for acl in acls
               if acl.resource == "topic" and "Read" in acl.operations
               and acl.name.startswith(f"{topology.AGENT_RESULTS}.")}
    assert readers == {agent_user("acme"), agent_user("globex")}


def test_only_the_relay_writes_what_outboxes_emit_and_it_reads_nothing():
    for user, acls in USERS.items():
        written = {acl.name for acl in acls if "Write" in acl.operations}
        if user == topology.RELAY:
            assert not any("Read" in acl.operations for acl in acls)
        elif user in topology.CONSUMER_GROUPS:
            assert written == set(), user


def test_the_relay_creates_tenants_results_topics_on_the_prefix_and_nothing_else():
    created = [acl for user, acls in USERS.items() for acl in acls if "Create" in acl.operations]
    assert [(acl.name, acl.pattern) for acl in created] == [(f"{topology.AGENT_RESULTS}.", "prefix")]
    assert [acl for acl in USERS[topology.RELAY] if acl.pattern == "prefix"] == created


@pytest.mark.parametrize("service", sorted(topology.CONSUMER_GROUPS))
def test_a_service_reads_exactly_the_topics_its_groups_consume_in_those_groups(service):
    acls = USERS[service]
    groups = topology.groups_of(service)
    assert {acl.name for acl in acls if acl.resource == "topic" and "Read" in acl.operations} == {
        name for group in groups for name in topology.consumed_by(group)}
    assert {acl.name for acl in acls if acl.resource == "group" and "Read" in acl.operations} == set(
        groups)


def test_the_relay_writes_only_what_a_running_outbox_producer_emits():
    without_downstreams = kafka_users(SERVED - {"wallet", "warehouse"}, [], [])
    written = {acl.name for acl in without_downstreams[topology.RELAY] if "Write" in acl.operations}
    assert topology.EFFECT_RECEIPTS not in written and topology.LEDGER_INTAKE in written


def test_a_broker_that_creates_nothing_gets_every_topic_and_each_tenants_results():
    made = topics(["effects.email"], ["acme"])
    assert topology.AGENT_RESULTS not in made
    assert {"agent.results.acme", "effects.email", topology.LEDGER_INTAKE} <= set(made)


def test_aclcommand_calls_add_exactly_the_bindings_asked_for():
    """Each call adds the product of its principals, operations and resources: grouping must
    never grant one user's operation on another's topic."""
    wanted = {binding for user, acls in USERS.items() for binding in bindings(user, acls)}
    added = set()
    for call in _grouped(wanted):
        pattern = "prefix" if call[call.index("--resource-pattern-type") + 1] == "PREFIXED" else "literal"
        pairs = list(zip(call[2::2], call[3::2], strict=True))
        users = [value.removeprefix("User:") for flag, value in pairs if flag == "--allow-principal"]
        operations = [_upper(value) for flag, value in pairs if flag == "--operation"]
        resources = [(flag.removeprefix("--"), value) for flag, value in pairs
                     if flag in ("--topic", "--group")]
        added |= {(user, kind, name, pattern, operation) for user, operation, (kind, name)
                  in itertools.product(users, operations, resources)}
    assert added == wanted


def test_operations_are_spelled_as_the_broker_lists_them_and_as_aclcommand_takes_them():
    assert _upper("DescribeConfigs") == "DESCRIBE_CONFIGS" and _camel("DESCRIBE_CONFIGS") == (
        "DescribeConfigs")


def test_credentials_are_random_stable_and_readable_by_their_owner_only(tmp_path):
    first = kafka_credentials.ensure(tmp_path, ["policy", "agent-acme"])
    again = kafka_credentials.ensure(tmp_path, ["policy", "agent-acme", "relay"])
    kafka_credentials.write_client_files(tmp_path, again, "127.0.0.1:1")

    assert {u: again.password(u) for u in first.passwords} == first.passwords
    assert len(set(again.passwords.values())) == len(again.passwords) == 5  # broker, admin too
    folder = kafka_credentials.folder(tmp_path)
    for path in [folder, folder / "env", *folder.rglob("*")]:
        mode = stat.S_IMODE(path.stat().st_mode)
        assert mode == (0o700 if path.is_dir() else 0o600), path
    env = kafka_credentials.env_file(tmp_path, "policy").read_text()
    assert "INTENTLEDGER_KAFKA_SASL_USERNAME=policy\n" in env
    assert f"INTENTLEDGER_KAFKA_SASL_PASSWORD={again.password('policy')}\n" in env
    assert not kafka_credentials.env_file(tmp_path, kafka_credentials.BROKER).exists()


def test_the_secure_listeners_deny_by_default_and_make_no_one_else_a_super_user(tmp_path):
    credentials = kafka_credentials.ensure(tmp_path, ["policy"])
    config = dict(line.split("=", 1) for line in
                  kafka_secure.listeners(1, 2, credentials).splitlines())
    assert config["super.users"] == "User:broker;User:admin"
    assert config["allow.everyone.if.no.acl.found"] == "false"
    assert config["auto.create.topics.enable"] == "false"
    assert set(config["listener.security.protocol.map"].replace(",", ":").split(":")[1::2]) == {
        "SASL_PLAINTEXT"}  # no anonymous listener, the controller's included


@pytest.mark.parametrize("formatted_secure", [True, False])
def test_a_data_directory_keeps_the_mode_it_was_formatted_in(tmp_path, formatted_secure):
    """Its users and ACLs live in it: started plain, a secure one would serve everyone."""
    (tmp_path / "kafka-data").mkdir()
    (tmp_path / "kafka-data" / "meta.properties").write_text("cluster.id=abc\n")
    state = InfraState(kafka_secure=formatted_secure)
    plan = None if formatted_secure else SecurePlan(users=USERS, topics=())
    with pytest.raises(InfraError, match="was made"):
        manager._choose_security(tmp_path, state, plan)
