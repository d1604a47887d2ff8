"""The topology is the one statement of the pipeline's wiring: the services' routing tables,
their settings' defaults, the README's topic table, the AsyncAPI channels and the schema files
all say the same as ``shared/topology.py`` (the Kubernetes ACLs and KEDA triggers:
``test_k8s.py``)."""

from __future__ import annotations

import re

import pytest
import yaml

from downstreams.wallet.routes import ROUTES as WALLET
from downstreams.warehouse.routes import ROUTES as WAREHOUSE
from services.dispatcher.routes import PRIORITY
from services.dispatcher.routes import ROUTES as DISPATCHER
from services.policy.routes import ROUTES as POLICY
from services.projection.routes import ROUTES as PROJECTION
from services.proposal_intake.routes import ROUTES as INTAKE
from shared import topology
from shared.messaging.routes import Router
from tests.support.deployment import consumers, example_tool_topics
from tests.support.k8s import ROOT

ROUTES = {"proposal-intake": INTAKE, "policy": POLICY, "dispatcher": DISPATCHER,
          "projection": PROJECTION, "wallet": WALLET, "warehouse": WAREHOUSE}
LANES = {"dispatcher": PRIORITY}
"""Topics a service reads in its priority lane (``ConsumerService.priority``)."""


def test_every_consuming_service_has_a_routing_table():
    assert set(ROUTES) == set(topology.CONSUMER_GROUPS)


@pytest.mark.parametrize("service", sorted(ROUTES))
def test_a_service_consumes_what_the_topology_says_in_the_groups_it_says(service):
    routed = set(ROUTES[service])
    lane = set(LANES.get(service, ()))
    assert lane <= routed
    assert routed - lane == set(topology.consumed_by(service))
    assert lane == set(topology.consumed_by(topology.priority_group(service)))


@pytest.mark.parametrize("service", sorted(ROUTES))
def test_a_routing_table_routes_each_event_type_once(service):
    router = Router(ROUTES[service])
    assert router.topics == tuple(ROUTES[service])
    for topic, kinds in router.accepts.items():
        assert kinds, f"{service} admits nothing on {topic}"


def test_a_routing_table_that_routes_one_event_type_from_two_topics_is_refused():
    with pytest.raises(ValueError, match="routed from two topics"):
        Router({"a": {"Thing": None}, "b": {"Thing": None}})


def test_two_routed_topics_configured_with_one_name_are_refused():
    with pytest.raises(ValueError, match="configured with one name"):
        Router(POLICY, {topology.LEDGER_INTAKE: "x", topology.LEDGER_APPROVALS: "x"})


def test_a_router_binds_its_topics_to_their_configured_names():
    router = Router(POLICY, {topology.LEDGER_INTAKE: "ledger.intake.t1"})
    assert set(router.topics) == {"ledger.intake.t1", topology.LEDGER_APPROVALS,
                                  topology.LEDGER_COMPENSATIONS, topology.LEDGER_RESOLUTIONS}
    assert router.accepts["ledger.intake.t1"] == frozenset(POLICY[topology.LEDGER_INTAKE])


def test_the_settings_default_to_the_topology_names():
    tool_topics = example_tool_topics()
    assert set(consumers()) == set(ROUTES)
    for service, (consumed, emitted) in consumers().items():
        assert consumed == set(ROUTES[service]), service
        declared = {topic.address for topic in topology.TOPICS if service in topic.producers}
        assert declared - tool_topics == emitted - tool_topics, service


def test_only_the_relay_people_agents_the_console_the_gateway_and_downstreams_write_to_kafka():
    writers = {writer for topic in topology.TOPICS for writer in topic.kafka_writers}
    assert writers == {topology.RELAY, topology.AGENTS, topology.OPERATORS, topology.CONSOLE,
                       topology.MCP_GATEWAY, topology.DOWNSTREAMS}


def test_every_topic_has_its_schema_file_and_examples():
    for topic in topology.TOPICS:
        assert (ROOT / "schemas" / topic.schema).is_file(), topic.name
        stem = topic.schema.removesuffix(".schema.json")
        assert list((ROOT / "schemas" / "examples" / stem).glob("*.json")), topic.name


def test_the_asyncapi_channels_are_the_topology_with_one_channel_for_every_tool_topic():
    asyncapi = yaml.safe_load((ROOT / "schemas" / "asyncapi.yaml").read_text("utf-8"))
    messages = asyncapi["components"]["messages"]
    channels = {}
    for channel in asyncapi["channels"].values():
        refs = {messages[m["$ref"].rsplit("/", 1)[1]]["payload"]["schema"]["$ref"]
                for m in channel["messages"].values()}
        channels[channel["address"]] = {ref.removeprefix("./") for ref in refs}
    tool_topics = {topology.EFFECTS_WALLET, topology.EFFECTS_WAREHOUSE}
    expected = {topic.address: {topic.schema} for topic in topology.TOPICS
                if topic.name not in tool_topics}
    expected["{toolTopic}"] = {topology.BY_NAME[topology.EFFECTS_WALLET].schema}
    assert channels == expected


def test_the_readme_topic_table_is_generated_from_the_topology():
    readme = (ROOT / "README.md").read_text("utf-8")
    table = re.search(r"<!-- topics:begin[^>]*-->\n(.*?)\n<!-- topics:end -->", readme, re.S)
    assert table, "the README has no topics:begin / topics:end block"
    assert table.group(1) == topology.readme_table(), (
        "regenerate it: python -m shared.topology --readme")
