"""The Kubernetes manifests (k8s/), rendered and checked offline: kustomize renders an overlay,
kubernetes-validate holds built-in objects to the API schemas, and small checks stand in for
the operators' schemas (Strimzi, KEDA, CloudNativePG), whose CRDs are not available here.

Every check returns the problems it found (an empty list is a pass), so a test can also feed a
broken copy of a rendered object and expect the problem to be reported."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import kubernetes_validate
import yaml

ROOT = Path(__file__).resolve().parents[2]
K8S = ROOT / "k8s"
OVERLAYS = ("dev", "prod")

KUSTOMIZE_VERSION = "v5.8.1"
"""The newest kustomize that builds with this machine's Go (v5.8.2+ need Go 1.27)."""
KUSTOMIZE_INSTALL = f"GOTOOLCHAIN=local go install sigs.k8s.io/kustomize/kustomize/v5@{KUSTOMIZE_VERSION}"

KUBERNETES_VERSIONS = ("1.33.0", "1.37.0")
"""The oldest Kubernetes the manifests claim (PodDisruptionBudget unhealthyPodEvictionPolicy,
matchLabelKeys, the preStop sleep action) and the newest kubernetes-validate ships."""

CUSTOM_API_VERSIONS = {
    "KafkaTopic": "kafka.strimzi.io/v1",
    "KafkaUser": "kafka.strimzi.io/v1",
    "ScaledObject": "keda.sh/v1alpha1",
    "TriggerAuthentication": "keda.sh/v1alpha1",
    "Cluster": "postgresql.cnpg.io/v1",
    "PodMonitor": "monitoring.coreos.com/v1",
    "PrometheusRule": "monitoring.coreos.com/v1",
}
KAFKA_OPERATIONS = {"Read", "Write", "Create", "Delete", "Alter", "Describe", "ClusterAction",
                    "AlterConfigs", "DescribeConfigs", "IdempotentWrite", "All"}


def kustomize_command() -> list[str] | None:
    """A pinned ``kustomize`` (KUSTOMIZE, PATH, or where ``go install`` puts it), else the one
    built into ``kubectl``; None when neither is installed."""
    candidates = [os.environ.get("KUSTOMIZE"), shutil.which("kustomize")]
    gobin = os.environ.get("GOBIN") or Path(os.environ.get("GOPATH") or Path.home() / "go") / "bin"
    candidates.append(str(Path(gobin) / "kustomize"))
    for candidate in filter(None, candidates):
        if Path(candidate).is_file() and os.access(candidate, os.X_OK):
            return [candidate, "build"]
    kubectl = shutil.which("kubectl")
    return [kubectl, "kustomize"] if kubectl else None


@cache
def render(overlay: str) -> tuple[dict, ...]:
    command = kustomize_command()
    assert command is not None, "no kustomize"
    built = subprocess.run([*command, str(K8S / "overlays" / overlay)], capture_output=True,
                           text=True, timeout=120, check=False)
    assert built.returncode == 0, f"kustomize failed for {overlay}:\n{built.stderr}"
    return tuple(doc for doc in yaml.safe_load_all(built.stdout) if doc)


def of_kind(objects, kind: str) -> dict[str, dict]:
    return {obj["metadata"]["name"]: obj for obj in objects if obj["kind"] == kind}


def is_builtin(obj: dict) -> bool:
    group = obj["apiVersion"].rpartition("/")[0]
    return group == "" or "." not in group or group.endswith(".k8s.io")


def schema_problems(objects, version: str) -> list[str]:
    """Built-in objects against the Kubernetes API schema of ``version``, strictly: an unknown
    field (a typo) is an error too."""
    problems = []
    for obj in objects:
        if not is_builtin(obj):
            continue
        try:
            kubernetes_validate.validate(obj, version, strict=True)
        except kubernetes_validate.ValidationError as error:
            problems.append(f"{obj['kind']}/{obj['metadata']['name']}: {error.message} "
                            f"at {'.'.join(map(str, error.absolute_path))}")
        except kubernetes_validate.SchemaNotFoundError as error:
            problems.append(f"{obj['kind']}/{obj['metadata']['name']}: {error.message}")
    return problems


def custom_resource_problems(objects) -> list[str]:
    """Custom resources: the API version the manifests target and the fields their operators
    require or this project relies on."""
    problems = []
    for obj in objects:
        if is_builtin(obj):
            continue
        where = f"{obj['kind']}/{obj.get('metadata', {}).get('name')}"
        expected = CUSTOM_API_VERSIONS.get(obj["kind"])
        if expected is None:
            problems.append(f"{where}: no check for this custom resource kind")
            continue
        if obj["apiVersion"] != expected:
            problems.append(f"{where}: apiVersion {obj['apiVersion']}, expected {expected}")
        problems += [f"{where}: {problem}" for problem in _CHECKS[obj["kind"]](obj)]
    return problems


def _kafka_topic(obj: dict) -> Iterator[str]:
    spec = obj.get("spec") or {}
    if not obj["metadata"].get("labels", {}).get("strimzi.io/cluster"):
        yield "no strimzi.io/cluster label (the Topic Operator ignores it)"
    for field in ("partitions", "replicas"):
        if not isinstance(spec.get(field), int) or spec[field] < 1:
            yield f"spec.{field} must be a positive integer"
    config = spec.get("config") or {}
    if "retention.ms" not in config:
        yield "no retention.ms"
    if int(config.get("min.insync.replicas", 1)) > spec.get("replicas", 0):
        yield "min.insync.replicas above replicas: no write could succeed"


def _kafka_user(obj: dict) -> Iterator[str]:
    spec = obj.get("spec") or {}
    if not obj["metadata"].get("labels", {}).get("strimzi.io/cluster"):
        yield "no strimzi.io/cluster label (the User Operator ignores it)"
    if (spec.get("authentication") or {}).get("type") != "scram-sha-512":
        yield "authentication.type must be scram-sha-512"
    authorization = spec.get("authorization") or {}
    if authorization.get("type") != "simple":
        yield "authorization.type must be simple"
    if not authorization.get("acls"):
        yield "no ACLs"
    for acl in authorization.get("acls") or []:
        resource = acl.get("resource") or {}
        if resource.get("type") not in {"topic", "group", "cluster", "transactionalId"}:
            yield f"ACL resource type {resource.get('type')!r}"
        if resource.get("type") != "cluster" and not resource.get("name"):
            yield "ACL resource without a name"
        if resource.get("patternType", "literal") not in {"literal", "prefix"}:
            yield f"ACL patternType {resource.get('patternType')!r}"
        operations = acl.get("operations")
        if not operations or not set(operations) <= KAFKA_OPERATIONS:
            yield f"ACL operations {operations!r}"


def _scaled_object(obj: dict) -> Iterator[str]:
    spec = obj.get("spec") or {}
    if not (spec.get("scaleTargetRef") or {}).get("name"):
        yield "no scaleTargetRef.name"
    low, high = spec.get("minReplicaCount"), spec.get("maxReplicaCount")
    if not (isinstance(low, int) and isinstance(high, int) and 1 <= low <= high):
        yield "replica counts must satisfy 1 <= minReplicaCount <= maxReplicaCount"
    if not spec.get("triggers"):
        yield "no triggers"
    for trigger in spec.get("triggers") or []:
        metadata = trigger.get("metadata") or {}
        if trigger.get("type") != "kafka":
            yield f"trigger type {trigger.get('type')!r}"
        for field in ("bootstrapServers", "consumerGroup", "topic", "lagThreshold"):
            if not metadata.get(field):
                yield f"kafka trigger without {field}"
        if not str(metadata.get("lagThreshold", "")).isdigit():
            yield "lagThreshold must be a whole number (a string)"
        if not (trigger.get("authenticationRef") or {}).get("name"):
            yield "kafka trigger without authenticationRef (the brokers require SCRAM)"


def _trigger_authentication(obj: dict) -> Iterator[str]:
    spec = obj.get("spec") or {}
    refs = [*spec.get("secretTargetRef", []), *spec.get("configMapTargetRef", [])]
    if not refs:
        yield "no secretTargetRef or configMapTargetRef"
    for ref in refs:
        if not all(ref.get(field) for field in ("parameter", "name", "key")):
            yield f"incomplete reference {ref!r}"


def _cluster(obj: dict) -> Iterator[str]:
    spec = obj.get("spec") or {}
    if not isinstance(spec.get("instances"), int) or spec["instances"] < 1:
        yield "spec.instances must be a positive integer"
    if not (spec.get("storage") or {}).get("size"):
        yield "no storage.size"
    initdb = (spec.get("bootstrap") or {}).get("initdb") or {}
    if not (initdb.get("database") and initdb.get("owner")):
        yield "bootstrap.initdb needs database and owner"
    if spec.get("instances", 0) < 2 and (spec.get("postgresql") or {}).get("synchronous"):
        yield "synchronous replication without a standby blocks every commit"
    for role in (spec.get("managed") or {}).get("roles") or []:
        if not role.get("name"):
            yield "managed role without a name"
        if role.get("login") and not (role.get("passwordSecret") or {}).get("name"):
            yield f"login role {role.get('name')} without passwordSecret"


def _pod_monitor(obj: dict) -> Iterator[str]:
    spec = obj.get("spec") or {}
    if not (spec.get("selector") or {}).get("matchLabels"):
        yield "no selector.matchLabels (it would scrape nothing, or everything)"
    for endpoint in spec.get("podMetricsEndpoints") or [{}]:
        if endpoint.get("port") != "health" or endpoint.get("path") != "/metrics":
            yield "each podMetricsEndpoint scrapes port health, path /metrics"


def _prometheus_rule(obj: dict) -> Iterator[str]:
    """promtool checks the expressions (tests/unit/test_monitoring.py); here, the shape."""
    for group in (obj.get("spec") or {}).get("groups") or [None]:
        if not group or not group.get("name") or not group.get("rules"):
            yield "a group needs a name and rules"
            continue
        for rule in group["rules"]:
            if not rule.get("alert") or not rule.get("expr"):
                yield f"group {group['name']}: a rule without alert or expr"
            elif (rule.get("labels") or {}).get("severity") not in {"warning", "critical"}:
                yield f"{rule['alert']}: severity must be warning or critical"


_CHECKS = {"KafkaTopic": _kafka_topic, "KafkaUser": _kafka_user, "ScaledObject": _scaled_object,
           "TriggerAuthentication": _trigger_authentication, "Cluster": _cluster,
           "PodMonitor": _pod_monitor, "PrometheusRule": _prometheus_rule}


def pod_templates(objects) -> dict[str, dict]:
    """Deployment and Job pod templates by workload name."""
    return {obj["metadata"]["name"]: obj["spec"]["template"] for obj in objects
            if obj["kind"] in {"Deployment", "Job"}}


def containers(template: dict) -> list[dict]:
    spec = template["spec"]
    return [*spec.get("initContainers", []), *spec["containers"]]


def env_of(container: dict) -> dict[str, dict]:
    return {entry["name"]: entry for entry in container.get("env", [])}


def selects(selector: dict, labels: dict) -> bool:
    """A label selector (matchLabels only, as these manifests use) matching ``labels``."""
    assert not selector.get("matchExpressions"), "matchExpressions are not evaluated here"
    return all(labels.get(key) == value for key, value in selector.get("matchLabels", {}).items())


def acls(user: dict) -> dict[tuple[str, str], set[str]]:
    """(resource type, name) → operations allowed; a prefixed name ends in ``*``."""
    found: dict[tuple[str, str], set[str]] = {}
    for acl in user["spec"]["authorization"]["acls"]:
        resource = acl["resource"]
        star = "*" if resource.get("patternType") == "prefix" else ""
        key = (resource["type"], resource["name"] + star)
        found.setdefault(key, set()).update(acl["operations"])
    return found


def secret_references(node) -> Iterator[str]:
    """Names of the Secrets an object reads, wherever a manifest can name one."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key in {"secretKeyRef", "passwordSecret"} and isinstance(value, dict):
                yield value["name"]
            elif key == "secretName":
                yield value
            elif key == "secretTargetRef":
                yield from (ref["name"] for ref in value)
            elif key == "initdb" and isinstance(value.get("secret"), dict):
                yield value["secret"]["name"]
            yield from secret_references(value)
    elif isinstance(node, list):
        for item in node:
            yield from secret_references(item)
