"""k8s/, checked offline: each overlay renders with kustomize, every built-in object validates
against the Kubernetes API schemas, the custom resources carry what their operators need, and
the manifests agree with the code — its services, consumer groups, topics, settings — so a
renamed topic or a new service fails here instead of in a cluster. Broken copies of rendered
objects are fed to the same checks and must be reported."""

from __future__ import annotations

import copy
import os
import re
from pathlib import Path

import pytest
import yaml

from services.dispatcher.settings import DispatcherSettings
from services.policy.settings import PolicySettings
from services.proposal_intake.settings import IntakeSettings
from services.relay.settings import RelaySettings
from shared.health import HealthSettings
from shared.infra.postgres_local import SERVER_SETTINGS
from shared.messaging.kafka_security import KafkaSecurity
from shared.telemetry import TelemetrySettings
from shared import topology
from shared.kafka_users import kafka_users, quotas
from shared.topology import EFFECT_RECEIPTS
from tests.support.deployment import (cli_grammar, consumers, defaults, example_tool_topics,
                                      known_env_names)
from tests.support.k8s import (K8S, KUBERNETES_VERSIONS, KUSTOMIZE_INSTALL, OVERLAYS, ROOT, acls,
                               containers, custom_resource_problems, env_of, kustomize_command,
                               of_kind, pod_templates, render, schema_problems, secret_references,
                               selects)

pytestmark = [pytest.mark.tooling, pytest.mark.skipif(
    kustomize_command() is None,
    reason=f"neither kustomize nor kubectl is installed: `{KUSTOMIZE_INSTALL}` (into $(go env GOPATH)/bin)")]

REFERENCE_DOWNSTREAMS = {"wallet", "warehouse"}
"""Deployed by the dev overlay only."""
HEALTH_PORT, QUERY_PORT, MCP_PORT = 8081, 8090, 8095
NO_DATABASE = {"mcp-gateway"}
"""Services that keep no state of their own: the gateway's calls are the intake's intents."""
SERVING = {"query": QUERY_PORT, "mcp-gateway": MCP_PORT}
"""The pods that take connections, and on which port."""


EXAMPLE_TOOL_TOPICS = example_tool_topics()
CONSUMERS = consumers()
"""Per consuming service (its name is its main consumer group): (consumed, emitted) topics."""
_intake, _policy = defaults(IntakeSettings), defaults(PolicySettings)
_dispatcher = defaults(DispatcherSettings)
OPERATOR_TOPICS = {_policy.approvals_topic, _dispatcher.resolutions_topic}
"""Published directly by people's commands (approve, reject, resolve), not through an outbox."""


EXAMPLE_TENANTS = ("acme", "globex")
"""The tenants of config/principals.example.yaml: each has its results topic and agent user."""


def code_topics() -> set[str]:
    return {topic.name for topic in topology.TOPICS if not topic.per_tenant} | {
        topology.results_topic(tenant) for tenant in EXAMPLE_TENANTS} | EXAMPLE_TOOL_TOPICS


def as_acl(topic: str) -> str:
    """A topic, or a per-tenant family (``agent.results.{tenant}``) as its prefixed ACL."""
    return topic.replace("{tenant}", "*")


AGENT_USERS = {f"intentledger-agent-{tenant}": tenant for tenant in EXAMPLE_TENANTS}


def consumer_groups_in_code() -> set[str]:
    """``ConsumerService(name=...)`` of every service's composition root."""
    return {match for path in [*(ROOT / "services").glob("*/main.py"),
                               *(ROOT / "downstreams").glob("*/main.py")]
            for match in re.findall(r'ConsumerService\(\s*name="([^"]+)"', path.read_text("utf-8"))}


@pytest.fixture(scope="module", params=OVERLAYS)
def overlay(request) -> str:
    return request.param


@pytest.fixture(scope="module")
def objects(overlay) -> tuple[dict, ...]:
    return render(overlay)


def shared_env(objects) -> dict[str, str]:
    """The ConfigMap every service reads its non-secret settings from (a generated name)."""
    return next(cm for name, cm in of_kind(objects, "ConfigMap").items()
                if name.startswith("intentledger-env-"))["data"]


def deployed(overlay: str) -> set[str]:
    return set(cli_grammar().serve_choices) - (REFERENCE_DOWNSTREAMS if overlay == "prod" else set())


# Rendering and schemas


def test_each_overlay_renders_into_its_own_namespace(overlay, objects):
    namespace = {"dev": "intentledger-dev", "prod": "intentledger"}[overlay]
    assert of_kind(objects, "Namespace").keys() == {namespace}
    for obj in objects:
        if obj["kind"] != "Namespace":
            assert obj["metadata"].get("namespace") == namespace, obj["metadata"]["name"]


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
def test_every_builtin_object_validates_against_the_kubernetes_schema(objects, version):
    assert schema_problems(objects, version) == []


def test_every_custom_resource_carries_what_its_operator_needs(objects):
    assert custom_resource_problems(objects) == []


def test_no_secret_value_is_committed(objects):
    assert not of_kind(objects, "Secret")
    for name, template in pod_templates(objects).items():
        for container in containers(template):
            for env in container.get("env", []):
                if re.search(r"PASSWORD|SECRET|API_KEYS|DATABASE_URL", env["name"]):
                    assert "valueFrom" in env, f"{name}: {env['name']} has a literal value"


def test_every_secret_referenced_is_documented(objects):
    documented = set(re.findall(r"`(intentledger-[a-z0-9-]+)`", (K8S / "README.md").read_text("utf-8")))
    referenced = {name for obj in objects for name in secret_references(obj)}
    made_by_strimzi = set(of_kind(objects, "KafkaUser"))
    assert referenced - made_by_strimzi <= documented


# The manifests and the code


def test_the_deployments_are_the_services_the_cli_serves(overlay, objects):
    deployments = of_kind(objects, "Deployment")
    assert set(deployments) == deployed(overlay)
    for name, deployment in deployments.items():
        assert deployment["spec"]["template"]["spec"]["containers"][0]["args"] == ["serve", name]
        assert cli_grammar().error(["serve", name]) is None


def test_migrations_run_from_the_same_image_before_the_services(objects):
    job = of_kind(objects, "Job")["migrate"]["spec"]["template"]["spec"]
    migrate = job["initContainers"][0]
    assert migrate["args"] == ["migrate"] and cli_grammar().error(["migrate"]) is None
    images = {d["spec"]["template"]["spec"]["containers"][0]["image"]
              for d in of_kind(objects, "Deployment").values()}
    assert images == {migrate["image"]}
    assert not migrate["image"].endswith(":latest")


def test_every_consumer_group_in_code_has_a_deployment(objects):
    assert consumer_groups_in_code() == set(CONSUMERS)
    assert set(CONSUMERS) <= set(of_kind(render("dev"), "Deployment"))


def test_every_topic_in_code_and_in_the_registry_has_a_kafka_topic(objects):
    configured = of_kind(objects, "ConfigMap")
    registry = next(cm for name, cm in configured.items() if name.startswith("intentledger-tools-"))
    tool_topics = {tool["topic"] for tool in yaml.safe_load(registry["data"]["tools.yaml"])["tools"]}
    topics = {topic["spec"]["topicName"] for topic in of_kind(objects, "KafkaTopic").values()}
    assert code_topics() | tool_topics <= topics
    assert topics <= code_topics() | tool_topics, "a KafkaTopic no code or registry names"


def test_the_shipped_registry_policy_and_principals_are_the_examples():
    for shipped, example in (("tools.yaml", "tools.example.yaml"), ("policy.yaml", "policy.example.yaml"),
                             ("principals.yaml", "principals.example.yaml")):
        assert (K8S / "base" / "config" / shipped).read_text() == (ROOT / "config" / example).read_text()


def test_every_variable_set_is_one_the_code_reads(objects):
    env_map = shared_env(objects)
    names = set(env_map)
    for template in pod_templates(objects).values():
        for container in containers(template):
            names |= set(env_of(container))
    unknown = {name for name in names if name.startswith("INTENTLEDGER_")} - known_env_names()
    assert unknown == set()
    assert env_map["INTENTLEDGER_HEALTH_PORT"] == str(HEALTH_PORT)
    assert env_map["INTENTLEDGER_QUERY_PORT"] == str(QUERY_PORT)


def test_each_pods_runtime_settings_are_accepted_by_the_code(objects, monkeypatch):
    """Kafka security, health and telemetry as every Deployment sets them (the ConfigMap and its
    own variables) are valid for the settings classes that read them: a SCRAM login over
    verified TLS for each Kafka client, OTLP over gRPC, the probes' port."""
    for name, deployment in of_kind(objects, "Deployment").items():
        env = dict(shared_env(objects))
        for variable, entry in env_of(deployment["spec"]["template"]["spec"]["containers"][0]).items():
            env[variable] = entry.get("value", f"<secret {variable}>")
        for variable in [v for v in os.environ if v.startswith(("INTENTLEDGER_", "OTEL_"))]:
            monkeypatch.delenv(variable)
        for variable, value in env.items():
            monkeypatch.setenv(variable, value)
        kafka = KafkaSecurity()
        assert (kafka.security_protocol, kafka.sasl_mechanism) == ("SASL_SSL", "SCRAM-SHA-512")
        assert kafka.sasl_username == f"intentledger-{name}"
        assert HealthSettings().port == HEALTH_PORT, name
        telemetry = TelemetrySettings()
        assert telemetry.otlp and telemetry.otlp_protocol == "grpc", name


SETTINGS_OWNER = {"INTAKE": "proposal-intake", "POLICY": "policy", "DISPATCHER": "dispatcher",
                  "QUERY": "query"}


def test_every_registry_and_policy_variable_names_a_mounted_file(objects):
    """The image names its example copies in every such variable (Dockerfile): a variable left
    unset here would make one service read another registry than the rest."""
    env_map = shared_env(objects)
    file_settings = {n for n in known_env_names()
                     if re.fullmatch(r"INTENTLEDGER_[A-Z]+_(TOOLS|POLICY)_FILE", n)}
    assert file_settings and file_settings <= set(env_map)
    deployments = of_kind(objects, "Deployment")
    for name in file_settings:
        path = Path(env_map[name])
        pod = deployments[SETTINGS_OWNER[name.split("_")[1]]]["spec"]["template"]["spec"]
        mount = next(m for m in pod["containers"][0]["volumeMounts"] if m["mountPath"] == str(path.parent))
        volume = next(v for v in pod["volumes"] if v["name"] == mount["name"])
        config_map = volume["configMap"]["name"]
        assert path.name in of_kind(objects, "ConfigMap")[config_map]["data"], name


# Pods


def test_every_pod_is_hardened_and_bounded(objects):
    for name, template in pod_templates(objects).items():
        spec = template["spec"]
        assert spec["automountServiceAccountToken"] is False, name
        assert spec["securityContext"]["runAsNonRoot"] is True, name
        assert spec["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault", name
        for container in containers(template):
            context = container["securityContext"]
            assert context["allowPrivilegeEscalation"] is False, name
            assert context["readOnlyRootFilesystem"] is True, name
            assert context["capabilities"]["drop"] == ["ALL"], name
            for bound in ("requests", "limits"):
                assert {"cpu", "memory"} <= set(container["resources"][bound]), (name, bound)


def test_every_service_has_probes_a_budget_and_a_spread(objects):
    budgets = of_kind(objects, "PodDisruptionBudget").values()
    for name, deployment in of_kind(objects, "Deployment").items():
        template = deployment["spec"]["template"]
        container = template["spec"]["containers"][0]
        ports = {port["name"]: port["containerPort"] for port in container["ports"]}
        assert ports["health"] == HEALTH_PORT, name
        assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "health"}, name
        assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "health"}, name
        assert container["startupProbe"]["httpGet"]["path"] == "/healthz", name
        labels = template["metadata"]["labels"]
        assert [b for b in budgets if selects(b["spec"]["selector"], labels)], f"{name}: no PDB"
        spread = template["spec"]["topologySpreadConstraints"]
        assert spread and all(selects(c["labelSelector"], labels) for c in spread), name
        assert template["spec"]["terminationGracePeriodSeconds"] >= 30, name


def test_the_relay_is_given_time_to_finish_its_batch_and_flush(objects):
    relay = of_kind(objects, "Deployment")["relay"]["spec"]["template"]["spec"]
    grace = float(env_of(relay["containers"][0]).get("INTENTLEDGER_RELAY_SHUTDOWN_GRACE_S", {}).get(
        "value", RelaySettings.model_fields["shutdown_grace_s"].default))
    assert relay["terminationGracePeriodSeconds"] > 2 * grace  # the batch, then the producer flush


def test_the_relay_drains_exactly_the_outboxes_of_the_deployed_services(overlay, objects):
    relay = env_of(of_kind(objects, "Deployment")["relay"]["spec"]["template"]["spec"]["containers"][0])
    schemas = set(yaml.safe_load(relay["INTENTLEDGER_RELAY_SCHEMAS"]["value"]))
    assert schemas == {name.replace("-", "_") for name in deployed(overlay) & set(CONSUMERS)}


def test_the_query_api_is_served_on_its_port(objects):
    query = of_kind(objects, "Deployment")["query"]["spec"]["template"]
    ports = {p["name"]: p["containerPort"] for p in query["spec"]["containers"][0]["ports"]}
    service = of_kind(objects, "Service")["query"]["spec"]
    assert ports["http"] == QUERY_PORT and service["ports"][0]["targetPort"] == "http"
    assert selects({"matchLabels": service["selector"]}, query["metadata"]["labels"])


# Network


def _policies(objects, pod_labels: dict) -> list[dict]:
    return [p["spec"] for p in of_kind(objects, "NetworkPolicy").values()
            if selects(p["spec"]["podSelector"], pod_labels)]


def test_every_pod_is_denied_by_default_and_takes_only_scrapes_and_its_api_clients(objects):
    """Prometheus reaches the health port (/metrics) of every pod; only the APIs (the query
    API, the MCP gateway) take other connections, each on its own port."""
    for name, template in pod_templates(objects).items():
        policies = _policies(objects, template["metadata"]["labels"])
        assert any(set(p["policyTypes"]) == {"Ingress", "Egress"} and not p.get("ingress")
                   and not p.get("egress") for p in policies), f"{name}: no default deny"
        ingress = [rule for p in policies for rule in p.get("ingress", [])]
        ports = sorted(port["port"] for rule in ingress for port in rule["ports"])
        assert ports == sorted([HEALTH_PORT, *([SERVING[name]] if name in SERVING else [])]), name
        scrape = next(rule for rule in ingress if rule["ports"][0]["port"] == HEALTH_PORT)
        assert scrape["from"] == [{"namespaceSelector": {"matchLabels": {
            "kubernetes.io/metadata.name": "monitoring"}}, "podSelector": {"matchLabels": {
                "app.kubernetes.io/name": "prometheus"}}}], f"{name}: metrics open to anyone"


def test_prometheus_scrapes_every_service_on_its_health_port(objects):
    monitor = of_kind(objects, "PodMonitor")["intentledger"]
    for name, obj in of_kind(objects, "Deployment").items():
        template = obj["spec"]["template"]
        assert selects(monitor["spec"]["selector"], template["metadata"]["labels"]), name
        ports = {port["name"]: port["containerPort"] for container in template["spec"]["containers"]
                 for port in container.get("ports", [])}
        assert ports.get("health") == HEALTH_PORT, f"{name}: no port named health"
    assert of_kind(objects, "PrometheusRule")["intentledger-alerts"]


def test_only_the_dispatcher_reaches_tool_endpoints_and_kafka_clients_reach_kafka(objects):
    for name, template in pod_templates(objects).items():
        egress = [rule for p in _policies(objects, template["metadata"]["labels"])
                  for rule in p.get("egress", [])]
        ports = {port["port"] for rule in egress for port in rule.get("ports", [])}
        tools = [rule for rule in egress if any("ipBlock" in peer or "intentledger.io/tool-endpoint"
                                                in peer.get("podSelector", {}).get("matchLabels", {})
                                                for peer in rule["to"])]
        assert bool(tools) == (name == "dispatcher"), name
        env = {n for c in containers(template) for n in env_of(c)}
        assert (9093 in ports) == ("INTENTLEDGER_KAFKA_SASL_PASSWORD" in env), name
        assert 53 in ports and (5432 in ports) == (name not in NO_DATABASE), name


# Autoscaling


def test_every_consumer_scales_on_the_lag_of_its_group_and_topics(overlay, objects):
    scaled = of_kind(objects, "ScaledObject")
    partitions = {t["spec"]["topicName"]: t["spec"]["partitions"]
                  for t in of_kind(objects, "KafkaTopic").values()}
    consumers = deployed(overlay) & set(CONSUMERS)
    assert set(scaled) == consumers  # not the relay (competing claimers), not the query API
    for name in consumers:
        spec = scaled[name]["spec"]
        assert spec["scaleTargetRef"]["name"] == name
        triggers = [t["metadata"] for t in spec["triggers"]]
        # One trigger per topic of each of its groups (the dispatcher's priority lane too).
        assert sorted((t["consumerGroup"], t["topic"]) for t in triggers) == sorted(
            (group, topic) for group in topology.groups_of(name)
            for topic in topology.consumed_by(group))
        assert {t["topic"] for t in triggers} == CONSUMERS[name][0]
        assert spec["maxReplicaCount"] <= min(partitions[t["topic"]] for t in triggers), name
        assert spec["triggers"][0]["authenticationRef"]["name"] in of_kind(objects, "TriggerAuthentication")
        assert "replicas" not in of_kind(objects, "Deployment")[name]["spec"], \
            f"{name}: the HPA owns replicas"


# Kafka users: least privilege


def test_each_consumer_reads_only_its_topics_and_group_and_writes_nothing(overlay, objects):
    users = of_kind(objects, "KafkaUser")
    for name in deployed(overlay) & set(CONSUMERS):
        consumed, emitted = CONSUMERS[name]
        allowed = acls(users[f"intentledger-{name}"])
        assert {n for (kind, n), ops in allowed.items() if kind == "topic" and "Read" in ops} == consumed
        assert {n for (kind, n), ops in allowed.items() if kind == "group" and "Read" in ops} == set(
            topology.groups_of(name))
        assert not any("Write" in ops for ops in allowed.values()), name
        others = {n for (kind, n), ops in allowed.items() if kind == "group" and "Read" not in ops}
        if name == "projection":  # the health sampler reads every group's lag, nothing more
            assert others == set(topology.SERVICE_GROUPS) - set(topology.groups_of(name))
            assert all(ops == {"Describe"} for (kind, n), ops in allowed.items()
                       if kind == "group" and n in others)
            assert set().union(*(topics for topics, _ in CONSUMERS.values())) <= {
                n for (kind, n), ops in allowed.items() if kind == "topic" and "Describe" in ops}
        else:
            assert not others, name
        # At start a service checks that every topic it names exists (ensure_topics); a
        # tenant's results topic is not checked: the relay creates it when first written.
        named = {topic for topic in consumed | emitted if "{tenant}" not in topic}
        assert named <= {n for (kind, n), ops in allowed.items()
                         if kind == "topic" and "Describe" in ops}, name


def test_only_the_relay_writes_what_services_emit(overlay, objects):
    users = of_kind(objects, "KafkaUser")
    emitted = set().union(*(CONSUMERS[name][1] for name in deployed(overlay) & set(CONSUMERS)))
    relay = acls(users["intentledger-relay"])
    assert {n for (kind, n), ops in relay.items() if "Write" in ops} == set(map(as_acl, emitted))
    assert not any("Read" in ops for ops in relay.values())
    # Create only where it creates a new tenant's topic on first use.
    assert {n for (kind, n), ops in relay.items() if "Create" in ops} == {
        as_acl(topology.BY_NAME[topology.AGENT_RESULTS].address)}
    writers = {name for name, user in users.items() if any("Write" in ops for ops in acls(user).values())}
    assert writers == {"intentledger-relay", "intentledger-operator", "intentledger-query",
                       "intentledger-mcp-gateway", *AGENT_USERS}
    assert acls(users["intentledger-query"]) == {  # the console's resolve form, and nothing else
        ("topic", _dispatcher.resolutions_topic): {"Write", "Describe"}}
    operator = acls(users["intentledger-operator"])
    assert {n for (_, n), ops in operator.items() if "Write" in ops} == OPERATOR_TOPICS
    for agent in AGENT_USERS:  # proposals, and withdrawals of its own calls
        assert {n for (_, n), ops in acls(users[agent]).items() if "Write" in ops} == {
            _intake.proposals_topic, _policy.approvals_topic}
    keda = acls(users["intentledger-keda"])
    assert set().union(*keda.values()) == {"Describe"}
    assert {n for kind, n in keda if kind == "group"} == {
        group for name in deployed(overlay) & set(CONSUMERS) for group in topology.groups_of(name)}


def test_every_kafka_user_holds_exactly_the_acls_derived_from_the_topology(overlay, objects):
    """The derivation ``infra up --secure`` provisions the local broker with
    (``shared.kafka_users``): local and Kubernetes ACLs cannot drift apart. KEDA's scaler is
    Kubernetes' alone."""
    users = of_kind(objects, "KafkaUser")
    derived = kafka_users(deployed(overlay), EXAMPLE_TOOL_TOPICS, EXAMPLE_TENANTS, scaler=True)
    assert set(users) == {f"intentledger-{name}" for name in derived}
    for name, wanted in derived.items():
        held = {(acl["resource"]["type"], acl["resource"]["name"], acl["resource"]["patternType"],
                 operation) for acl in users[f"intentledger-{name}"]["spec"]["authorization"]["acls"]
                for operation in acl["operations"]}
        assert held == {(acl.resource, acl.name, acl.pattern, operation)
                        for acl in wanted for operation in acl.operations}, name


def test_every_kafka_user_holds_the_quota_derived_for_it(overlay, objects):
    """As ``infra up --secure`` sets them on the local broker: every tenant's agent user has
    the agents' quota, in Strimzi's names (``producer_byte_rate`` is ``producerByteRate``);
    the deployment's own users have none (their rates are the pipeline's)."""
    users = of_kind(objects, "KafkaUser")
    derived = quotas(kafka_users(deployed(overlay), EXAMPLE_TOOL_TOPICS, EXAMPLE_TENANTS))
    assert {name for name, user in users.items() if "quotas" in user["spec"]} == {
        f"intentledger-{name}" for name in derived}
    for name, quota in derived.items():
        assert users[f"intentledger-{name}"]["spec"]["quotas"] == {
            re.sub(r"_(\w)", lambda m: m.group(1).upper(), config): value
            for config, value in quota.configs().items()}, name


KAFKA_USERS = {topology.RELAY: {"intentledger-relay"}, topology.OPERATORS: {"intentledger-operator"},
               topology.CONSOLE: {"intentledger-query"}, topology.AGENTS: set(AGENT_USERS),
               topology.MCP_GATEWAY: {"intentledger-mcp-gateway"}}
"""The Kafka users of each writer the topology names (downstream systems bring their own)."""


def test_who_may_write_each_topic_is_who_the_topology_says(overlay, objects):
    users, running = of_kind(objects, "KafkaUser"), deployed(overlay)
    for topic in topology.TOPICS:
        writers = {name for name, user in users.items()
                   if "Write" in acls(user).get(("topic", as_acl(topic.address)), set())}
        through_outbox = any(producer in topology.OUTBOX_PRODUCERS and producer in running
                             for producer in topic.producers)
        expected = set().union(*(KAFKA_USERS[writer] for writer in topic.kafka_writers
                                 if writer in KAFKA_USERS
                                 and (writer != topology.RELAY or through_outbox)))
        assert writers == expected, topic.name


def test_a_tenants_agents_read_their_own_answers_and_nothing_else(objects):
    """Read on exactly its own results topic, by a LITERAL ACL (a prefixed agent.results.acme
    would match agent.results.acme2), Write on proposals and on approvals (its withdrawals), no
    group, nothing more."""
    users = of_kind(objects, "KafkaUser")
    every_tenants = {topology.results_topic(tenant) for tenant in EXAMPLE_TENANTS}
    for agent, tenant in AGENT_USERS.items():
        entries = users[agent]["spec"]["authorization"]["acls"]
        assert {(a["resource"]["type"], a["resource"]["name"], a["resource"]["patternType"],
                 tuple(sorted(a["operations"]))) for a in entries} == {
            ("topic", topology.results_topic(tenant), "literal", ("Describe", "Read")),
            ("topic", _intake.proposals_topic, "literal", ("Describe", "Write")),
            ("topic", _policy.approvals_topic, "literal", ("Describe", "Write"))}
        readable = {n for (kind, n), ops in acls(users[agent]).items() if "Read" in ops}
        assert readable & every_tenants == {topology.results_topic(tenant)}
    readers = {name for name, user in users.items()
               if any(n.startswith(topology.AGENT_RESULTS) and "Read" in ops
                      for (kind, n), ops in acls(user).items())}
    assert readers == set(AGENT_USERS) | {"intentledger-mcp-gateway"}, \
        "nobody else reads any tenant's answers (the gateway reads them for its callers)"
    assert acls(users["intentledger-mcp-gateway"]) == {
        ("topic", _intake.proposals_topic): {"Write", "Describe"},
        ("topic", topology.LEDGER_APPROVALS): {"Write", "Describe"},  # withdrawals only
        ("topic", f"{topology.AGENT_RESULTS}.*"): {"Read", "Describe"}}


def test_each_example_tenants_results_topic_has_the_familys_partitions(objects):
    topics = {t["spec"]["topicName"]: t["spec"] for t in of_kind(objects, "KafkaTopic").values()}
    for tenant in EXAMPLE_TENANTS:
        assert topics[topology.results_topic(tenant)]["partitions"] == topology.RESULTS_PARTITIONS


def test_every_kafka_client_logs_in_as_its_own_user(objects):
    users = of_kind(objects, "KafkaUser")
    for name, deployment in of_kind(objects, "Deployment").items():
        env = env_of(deployment["spec"]["template"]["spec"]["containers"][0])
        if name not in CONSUMERS and name not in ("relay", "query", "mcp-gateway"):
            assert "INTENTLEDGER_KAFKA_SASL_USERNAME" not in env, f"{name} needs no Kafka user"
            continue
        username = env["INTENTLEDGER_KAFKA_SASL_USERNAME"]["value"]
        assert username == f"intentledger-{name}" and username in users
        # Strimzi's User Operator writes the password to a Secret named like the user.
        assert env["INTENTLEDGER_KAFKA_SASL_PASSWORD"]["valueFrom"]["secretKeyRef"] == {
            "name": username, "key": "password"}


# PostgreSQL


def test_each_service_has_its_own_database_role(overlay, objects):
    cluster = of_kind(objects, "Cluster")["intentledger-pg"]["spec"]
    roles = {role["name"]: role for role in cluster["managed"]["roles"]}
    services = deployed(overlay) - NO_DATABASE
    assert set(roles) == {"intentledger"} | {name.replace("-", "_") for name in services}
    # The migration role hands each schema to its owner (postgres/grants.sql): it must be a member.
    assert set(roles["intentledger"]["inRoles"]) == {n.replace("-", "_") for n in services} - {"relay"}
    assert roles["query"]["inherit"] is False  # row-level security applies only after SET ROLE
    for name, template in pod_templates(objects).items():
        if name in NO_DATABASE:
            assert "INTENTLEDGER_DATABASE_URL" not in env_of(containers(template)[0]), name
            continue
        url = env_of(containers(template)[0])["INTENTLEDGER_DATABASE_URL"]["valueFrom"]["secretKeyRef"]
        secret = "intentledger-db-migrator" if name == "migrate" else f"intentledger-db-{name}"
        assert url == {"name": secret, "key": "uri"}, name
    for role in cluster["managed"]["roles"]:
        expected = "intentledger-db-" + ("migrator" if role["name"] == "intentledger"
                                         else role["name"].replace("_", "-"))
        assert role["passwordSecret"]["name"] == expected


def test_production_postgresql_runs_the_settings_the_benchmark_measured():
    """The local cluster of the tests, the demo and the benchmark runs ``SERVER_SETTINGS``; the
    production cluster must run them too, or the benchmark measures a server nobody deploys.
    (The dev overlay sizes the server for a laptop.)"""
    parameters = of_kind(render("prod"), "Cluster")["intentledger-pg"]["spec"]["postgresql"]["parameters"]
    assert {name: parameters.get(name) for name in SERVER_SETTINGS} == SERVER_SETTINGS


def test_dev_postgresql_plans_as_production_does():
    """The dev overlay sizes the server for a laptop, but ``random_page_cost`` is how the
    planner weighs a key lookup against a scan, not a size: at the packaged 4 the services'
    plans, made once per connection, read a new cluster's tables whole."""
    parameters = of_kind(render("dev"), "Cluster")["intentledger-pg"]["spec"]["postgresql"]["parameters"]
    assert parameters.get("random_page_cost") == SERVER_SETTINGS["random_page_cost"] == "1.1"


# Broken manifests must be reported


def _break_deployment_port(objs):
    objs["Deployment"]["spec"]["template"]["spec"]["containers"][0]["ports"][0]["containerPort"] = "health"


def _misspell_deployment_field(objs):
    objs["Deployment"]["spec"]["replica"] = 2


def _weaken_kafka_user(objs):
    objs["KafkaUser"]["spec"]["authentication"]["type"] = "scram-sha-256"


def _drop_consumer_group(objs):
    del objs["ScaledObject"]["spec"]["triggers"][0]["metadata"]["consumerGroup"]


def _zero_partitions(objs):
    objs["KafkaTopic"]["spec"]["partitions"] = 0


def _role_without_password(objs):
    del objs["Cluster"]["spec"]["managed"]["roles"][1]["passwordSecret"]


@pytest.mark.parametrize("breakage", [_break_deployment_port, _misspell_deployment_field,
                                      _weaken_kafka_user, _drop_consumer_group, _zero_partitions,
                                      _role_without_password])
def test_a_broken_manifest_is_reported(breakage):
    broken = copy.deepcopy(list(render("prod")))
    first = {}
    for obj in broken:
        first.setdefault(obj["kind"], obj)
    breakage(first)
    assert schema_problems(broken, KUBERNETES_VERSIONS[0]) + custom_resource_problems(broken)


def test_a_missing_topic_is_reported():
    objects = [obj for obj in render("prod")
               if not (obj["kind"] == "KafkaTopic" and obj["metadata"]["name"] == EFFECT_RECEIPTS)]
    topics = {topic["spec"]["topicName"] for topic in of_kind(objects, "KafkaTopic").values()}
    assert not code_topics() <= topics
