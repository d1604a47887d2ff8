"""docker-compose.yml, checked offline: no Docker here, so the Compose Specification's own
schema stands in for ``docker compose config``, and the host ports are held to the defaults
INTENTLEDGER's settings use, so the exported endpoints in the file's header just work."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from jsonschema import Draft7Validator

from shared.config import Settings

ROOT = Path(__file__).resolve().parents[2]
COMPOSE_SPEC = Path(__file__).resolve().parents[3] / "shared" / "data" / "compose-spec.schema.json"
DEFAULTS = {name: field.default for name, field in Settings.model_fields.items()}


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text(encoding="utf-8"))


def published(service: dict) -> dict[int, int]:
    """Host port → container port, from short-syntax entries such as ``127.0.0.1:1:2``."""
    mapping = {}
    for entry in service.get("ports", []):
        *_, host, container = str(entry).split(":")
        mapping[int(host)] = int(container)
    return mapping


def environment(service: dict) -> dict[str, str]:
    return {name: str(value) for name, value in service["environment"].items()}


def test_the_compose_file_satisfies_the_compose_specification(compose):
    schema = json.loads(COMPOSE_SPEC.read_text(encoding="utf-8"))
    errors = sorted(Draft7Validator(schema).iter_errors(compose), key=lambda e: list(e.path))
    assert not errors, "\n".join(f"{list(e.path)}: {e.message}" for e in errors)


def test_it_provides_kafka_and_postgres(compose):
    assert {"kafka", "postgres"} <= set(compose["services"])


def test_every_service_has_a_healthcheck_so_up_wait_means_ready(compose):
    for name, service in compose["services"].items():
        check = service.get("healthcheck", {})
        assert check.get("test") and not check.get("disable"), f"{name} has no healthcheck"


def test_kafka_runs_the_broker_version_of_the_local_infrastructure(compose):
    assert compose["services"]["kafka"]["image"] == f"apache/kafka:{DEFAULTS['kafka_version']}"


def test_the_host_reaches_kafka_on_the_default_port_it_is_advertised_on(compose):
    kafka = compose["services"]["kafka"]
    port = DEFAULTS["kafka_port"]
    assert published(kafka) == {port: port}
    env = environment(kafka)
    assert f"EXTERNAL://:{port}" in env["KAFKA_LISTENERS"].split(",")
    assert f"EXTERNAL://127.0.0.1:{port}" in env["KAFKA_ADVERTISED_LISTENERS"].split(",")


def test_kafka_is_a_single_node_kraft_cluster_with_internal_topics_it_can_host(compose):
    env = environment(compose["services"]["kafka"])
    assert env["KAFKA_PROCESS_ROLES"] == "broker,controller"
    assert env["KAFKA_CONTROLLER_QUORUM_VOTERS"] == f"{env['KAFKA_NODE_ID']}@kafka:9093"
    assert env["KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR"] == "1"
    assert env["KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR"] == "1"


def test_the_host_reaches_postgres_on_the_default_port_and_database(compose):
    postgres = compose["services"]["postgres"]
    assert published(postgres) == {DEFAULTS["postgres_port"]: 5432}
    assert environment(postgres)["POSTGRES_DB"] == DEFAULTS["database_name"]
    assert any(str(v).startswith("postgres-data:") for v in postgres["volumes"])
