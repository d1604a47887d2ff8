"""docker-compose.yml, checked offline: no Docker here, so the Compose Specification's own
schema stands in for ``docker compose config``; the services and their commands are held to the
command line the code defines (intentledger/cli.py), the host ports to the defaults INTENTLEDGER's
settings use. Each check returns the problems it finds, and a broken file is shown to be
reported (``test_a_broken_file_is_reported``)."""

from __future__ import annotations

import json
import shlex
from collections import Counter
from urllib.parse import urlsplit

import pytest
import yaml
from jsonschema import Draft7Validator

from services.relay.settings import RelaySettings
from shared.config import Settings
from shared.infra.postgres_local import SERVER_SETTINGS
from tests.support.deployment import (DEPLOYED_COMMANDS, HEALTH_PORT, ROOT, cli_grammar, seconds,
                                      unread_env_names)

COMPOSE_SPEC = ROOT / "tests" / "data" / "compose-spec" / "compose-spec.schema.json"
DEFAULTS = {name: field.default for name, field in Settings.model_fields.items()}
IMAGE = "intentledger:dev"
NO_PROBE = {"otel-collector": "the image is a lone binary: no shell, no HTTP client"}


def load() -> dict:
    """The file as Compose sees it, merge keys resolved; a JSON round trip unshares the mappings
    YAML aliases share, so one service can be changed without changing the others."""
    return json.loads(json.dumps(yaml.safe_load((ROOT / "docker-compose.yml").read_text("utf-8"))))


@pytest.fixture(scope="module")
def compose() -> dict:
    return load()


def published(service: dict) -> dict[int, int]:
    """Host port → container port, from short-syntax entries such as ``127.0.0.1:1:2``."""
    mapping = {}
    for entry in service.get("ports", []):
        *_, host, container = str(entry).split(":")
        mapping[int(host)] = int(container)
    return mapping


def environment(service: dict) -> dict[str, str]:
    return {name: str(value) for name, value in service.get("environment", {}).items()}


def ours(compose: dict) -> dict[str, dict]:
    """Services run from the project's image."""
    return {name: s for name, s in compose["services"].items()
            if s.get("image") == IMAGE or "build" in s}


def served(compose: dict) -> dict[str, str]:
    """Compose service → the ``serve`` target its command names."""
    return {name: s["command"][1] for name, s in ours(compose).items()
            if isinstance(s.get("command"), list) and s["command"][:1] == ["serve"]
            and len(s["command"]) > 1}


def build_context(service: dict) -> str | None:
    build = service.get("build")
    return build.get("context") if isinstance(build, dict) else build


def one_shots(compose: dict) -> set[str]:
    return {dep for s in compose["services"].values()
            for dep, how in (s.get("depends_on") or {}).items()
            if isinstance(how, dict) and how.get("condition") == "service_completed_successfully"}


# -- checks: each returns the problems it finds ---------------------------------------------------

def schema_problems(compose: dict) -> list[str]:
    schema = json.loads(COMPOSE_SPEC.read_text(encoding="utf-8"))
    errors = sorted(Draft7Validator(schema).iter_errors(compose), key=lambda e: list(e.path))
    return [f"schema: {list(e.path)}: {e.message}" for e in errors]


def command_problems(compose: dict) -> list[str]:
    grammar, problems = cli_grammar(), []
    for name, service in ours(compose).items():
        command = service.get("command")
        if service.get("image") != IMAGE or build_context(service) != ".":
            problems.append(f"{name}: not built from ./Dockerfile as {IMAGE}")
        if not isinstance(command, list) or not command:
            problems.append(f"{name}: no exec-form command (the image's default would run)")
            continue
        if refusal := grammar.error(command):
            problems.append(f"{name}: `intentledger {' '.join(command)}` is refused: {refusal}")
        elif command[0] not in DEPLOYED_COMMANDS:
            problems.append(f"{name}: `{command[0]}` is not a process a deployment runs")
    runs = Counter(served(compose).values())
    for target in grammar.serve_choices:
        if runs[target] != 1:
            problems.append(f"`serve {target}` is run by {runs[target]} services, not 1")
    problems += [f"{name} runs `serve {target}`: name the service after it"
                 for name, target in served(compose).items() if name != target]
    migrations = [n for n, s in ours(compose).items() if s.get("command") == ["migrate"]]
    if len(migrations) != 1:
        problems.append(f"{len(migrations)} services run `migrate`, not 1")
    return problems


def dependency_problems(compose: dict) -> list[str]:
    services, problems = compose["services"], []
    wanted = {"migrate": "service_completed_successfully", "kafka": "service_healthy",
              "postgres": "service_healthy"}
    for name in served(compose):
        depends = services[name].get("depends_on") or {}
        for dependency, condition in wanted.items():
            got = depends.get(dependency, {}).get("condition") if isinstance(depends, dict) else None
            if got != condition:
                problems.append(f"{name}: depends on {dependency} {got or 'not at all'}, "
                                f"needs {condition}")
    migrate = services.get("migrate", {})
    if (migrate.get("depends_on") or {}).get("postgres", {}).get("condition") != "service_healthy":
        problems.append("migrate: does not wait for postgres to be healthy")
    for name in one_shots(compose):
        if services.get(name, {}).get("restart", "no") != "no":
            problems.append(f"{name}: a one-shot step must not restart (nothing would complete)")
    for name, service in services.items():
        for dependency, how in (service.get("depends_on") or {}).items():
            if dependency not in services:
                problems.append(f"{name}: depends on {dependency}, which is not defined")
            elif (isinstance(how, dict) and how.get("condition") == "service_healthy"
                  and "healthcheck" not in services[dependency]):
                problems.append(f"{name}: waits for {dependency} to be healthy; it has no check")
    return problems


def healthcheck_problems(compose: dict) -> list[str]:
    problems = []
    for name, service in compose["services"].items():
        check = service.get("healthcheck") or {}
        if name in served(compose):
            port = environment(service).get("INTENTLEDGER_HEALTH_PORT", str(HEALTH_PORT))
            test = check.get("test") or []
            if check.get("disable") or f"127.0.0.1:{port}/readyz" not in " ".join(test):
                problems.append(f"{name}: no healthcheck on /readyz (port {port})")
            elif test[:2] != ["CMD", "python"]:
                problems.append(f"{name}: the healthcheck must run python (the image has no curl)")
        elif name not in one_shots(compose) | NO_PROBE.keys():
            if not check.get("test") or check.get("disable"):
                problems.append(f"{name}: no healthcheck, so `up --wait` cannot mean ready")
    return problems


def configuration_problems(compose: dict) -> list[str]:
    services, problems = compose["services"], []
    kafka = environment(services["kafka"])
    internal = next(a.split("//")[1] for a in kafka["KAFKA_ADVERTISED_LISTENERS"].split(",")
                    if a.startswith("PLAINTEXT://"))
    grace = RelaySettings.model_fields["shutdown_grace_s"].default
    for name, service in ours(compose).items():
        env = environment(service)
        problems += [f"{name}: {var} is read by no code" for var in unread_env_names(env)]
        if env.get("INTENTLEDGER_KAFKA_BOOTSTRAP") != internal:
            problems.append(f"{name}: INTENTLEDGER_KAFKA_BOOTSTRAP is not {internal}, where Kafka "
                            "is advertised to containers")
        database = urlsplit(env.get("INTENTLEDGER_DATABASE_URL", ""))
        if (database.hostname, database.port, database.path) != (
                "postgres", 5432, "/" + DEFAULTS["database_name"]):
            problems.append(f"{name}: the database URL does not name postgres:5432")
        if name in served(compose):
            if seconds(service.get("stop_grace_period", "10s")) <= grace:
                problems.append(f"{name}: stop_grace_period leaves no time for the relay's "
                                f"{grace:g} s shutdown grace")
            collector = urlsplit(env.get("OTEL_EXPORTER_OTLP_ENDPOINT", ""))
            if env.get("INTENTLEDGER_OTLP") != "1" or collector.hostname not in services:
                problems.append(f"{name}: does not export OTLP to the collector")
        problems += capability_key_problems(name, service, env)
    return problems


SIGNS, VERIFY = {"policy"}, {"dispatcher", "wallet", "warehouse"}
"""Who holds the policy's private capability key, and who verifies with the public set."""


def capability_key_problems(name: str, service: dict, env: dict) -> list[str]:
    problems = []
    mounts = {str(volume).split(":")[0] for volume in service.get("volumes", [])}
    signing = "INTENTLEDGER_CAPABILITY_SIGNING_KEY_FILE" in env or "capability-signing" in mounts
    if "INTENTLEDGER_DEV_MODE" in env or "INTENTLEDGER_CAPABILITY_SIGNING_KEY" in env:
        problems.append(f"{name}: a development or inline capability key")
    if name in SIGNS and not ("INTENTLEDGER_CAPABILITY_SIGNING_KEY_FILE" in env
                              and "capability-signing" in mounts):
        problems.append(f"{name}: does not read the generated signing key")
    elif name not in SIGNS and name != "capability-keys" and signing:
        problems.append(f"{name}: holds the policy's signing key and has no use for it")
    if name in VERIFY and not ("INTENTLEDGER_CAPABILITY_PUBLIC_KEYS_FILE" in env
                               and "capability-public" in mounts):
        problems.append(f"{name}: does not verify with the generated public key set")
    return problems


def image_and_volume_problems(compose: dict) -> list[str]:
    problems, declared = [], set(compose.get("volumes") or {})
    for name, service in compose["services"].items():
        image = service.get("image", "")
        if name not in ours(compose):
            tag = image.rpartition(":")[2] if ":" in image else ""
            if not tag or tag == "latest":
                problems.append(f"{name}: image {image!r} is not pinned to a version")
        for volume in service.get("volumes", []):
            source = str(volume).split(":")[0]
            if source.startswith((".", "/")):
                if not (ROOT / source).exists():
                    problems.append(f"{name}: mounts {source}, which does not exist")
            elif source not in declared:
                problems.append(f"{name}: named volume {source} is not declared")
    return problems


CHECKS = (schema_problems, command_problems, dependency_problems, healthcheck_problems,
          configuration_problems, image_and_volume_problems)


@pytest.mark.parametrize("check", CHECKS, ids=lambda check: check.__name__)
def test_the_compose_file_passes(compose, check):
    assert check(compose) == []


def test_it_runs_every_service_the_command_line_serves_and_the_migrations(compose):
    assert sorted(served(compose).values()) == sorted(cli_grammar().serve_choices)
    assert ours(compose).keys() == set(served(compose)) | {"migrate", "capability-keys"}
    assert one_shots(compose) == {"migrate", "capability-keys"}


# -- the checks catch a broken file ---------------------------------------------------------------

def _set(path: str, value):
    def mutate(compose: dict) -> None:
        *parents, last = path.split(".")
        node = compose
        for key in parents:
            node = node[key]
        if value is None:
            del node[last]
        else:
            node[last] = value
    return mutate


BROKEN = {
    "healthcheck removed": (_set("services.dispatcher.healthcheck", None),
                            "dispatcher: no healthcheck on /readyz"),
    "liveness, not readiness": (_set("services.policy.healthcheck.test", [
        "CMD", "python", "-c", "import urllib.request as u; u.urlopen('http://127.0.0.1:8081/healthz')"]),
        "policy: no healthcheck on /readyz"),
    "curl in a slim image": (_set("services.wallet.healthcheck.test", [
        "CMD", "curl", "-f", "http://127.0.0.1:8081/readyz"]), "wallet: the healthcheck must run python"),
    "unknown service": (_set("services.relay.command", ["serve", "relays"]),
                        "relay: `intentledger serve relays` is refused: "),
    "unknown command": (_set("services.projection.command", ["project"]),
                        "projection: `intentledger project` is refused"),
    "not a deployed process": (_set("services.query.command", ["demo"]),
                               "query: `demo` is not a process a deployment runs"),
    "service missing": (_set("services.warehouse", None),
                        "`serve warehouse` is run by 0 services, not 1"),
    "service twice": (lambda c: c["services"].__setitem__("relay-2", c["services"]["relay"]),
                      "`serve relay` is run by 2 services, not 1"),
    "no migration step": (_set("services.policy.depends_on.migrate", None),
                          "policy: depends on migrate not at all"),
    "started is not healthy": (_set("services.projection.depends_on.kafka",
                                    {"condition": "service_started"}),
                               "projection: depends on kafka service_started, needs service_healthy"),
    "no depends_on": (_set("services.query.depends_on", None), "query: depends on postgres not at all"),
    "restarting one-shot": (_set("services.migrate.restart", "unless-stopped"),
                            "migrate: a one-shot step must not restart"),
    "kafka unchecked": (_set("services.kafka.healthcheck", None), "kafka: no healthcheck"),
    "misspelt setting": (_set("services.query.environment.INTENTLEDGER_QUERY_HOSTS", "0.0.0.0"),
                         "query: INTENTLEDGER_QUERY_HOSTS is read by no code"),
    "signing key shared": (_set("services.dispatcher.environment."
                                "INTENTLEDGER_CAPABILITY_SIGNING_KEY_FILE", "/k/policy.jwk"),
                           "dispatcher: holds the policy's signing key and has no use for it"),
    "dev key": (_set("services.wallet.environment.INTENTLEDGER_DEV_MODE", "true"),
                "wallet: a development or inline capability key"),
    "unverified": (_set("services.warehouse.environment", {}),
                   "warehouse: does not verify with the generated public key set"),
    "kill before the relay drains": (_set("services.relay.stop_grace_period", "5s"),
                                     "relay: stop_grace_period leaves no time"),
    "floating image": (_set("services.postgres.image", "postgres:latest"),
                       "postgres: image 'postgres:latest' is not pinned"),
    "undeclared volume": (_set("volumes", {"postgres-data": None}),
                          "kafka: named volume kafka-data is not declared"),
    "schema violation": (_set("services.relay.depends_on.migrate.condition", "service_done"),
                         "schema: ['services', 'relay', 'depends_on']"),
}


@pytest.mark.parametrize("mutate, reported", BROKEN.values(), ids=BROKEN.keys())
def test_a_broken_file_is_reported(mutate, reported):
    broken = load()
    mutate(broken)
    problems = [problem for check in CHECKS for problem in check(broken)]
    assert any(problem.startswith(reported) for problem in problems), problems


def documented_commands(text: str) -> list[list[str]]:
    """The arguments of each ``docker compose exec|run <service> intentledger …`` in shell lines
    (``#``-comments or a fenced block), backslash continuations joined."""
    lines = [line.removeprefix("#").strip() for line in text.splitlines()]
    found = []
    for line in "\n".join(lines).replace("\\\n", " ").splitlines():
        words = shlex.split(line.split("  #")[0]) if line.startswith("docker compose ") else []
        if words[2:3] in (["exec"], ["run"]):
            rest = [w for w in words[3:] if not w.startswith("-")]
            if rest[1:2] == ["intentledger"]:
                found.append(words[words.index("intentledger", 3) + 1:])
    return found


def test_the_commands_the_header_and_the_readme_show_are_commands_the_cli_accepts():
    header = (ROOT / "docker-compose.yml").read_text("utf-8").split("\nname:")[0]
    readme = (ROOT / "docs" / "deploy.md").read_text("utf-8")
    laptop = readme[readme.index("## Laptop with Docker"):]
    laptop = laptop[:laptop.index("\n## ", 1)]
    for shown in (documented_commands(header), documented_commands(laptop)):
        assert [argv[:2] for argv in shown] == [["propose", "--run"], ["runs", "show"]]
        assert {" ".join(argv): cli_grammar().error(argv) for argv in shown} == {
            " ".join(argv): None for argv in shown}


# -- the host side: the endpoints the header exports ----------------------------------------------

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


def test_kafka_keeps_its_log_in_a_named_volume(compose):
    kafka = compose["services"]["kafka"]
    log_dirs = environment(kafka)["KAFKA_LOG_DIRS"]
    assert f"kafka-data:{log_dirs}" in kafka["volumes"]


def test_the_host_reaches_postgres_on_the_default_port_and_database(compose):
    postgres = compose["services"]["postgres"]
    assert published(postgres) == {DEFAULTS["postgres_port"]: 5432}
    assert environment(postgres)["POSTGRES_DB"] == DEFAULTS["database_name"]
    assert any(str(v).startswith("postgres-data:") for v in postgres["volumes"])


def test_postgres_runs_the_settings_the_benchmark_measured(compose):
    command = compose["services"]["postgres"]["command"]
    assert command[0] == "postgres"
    assert dict(option.split("=", 1) for option in command[2::2]) == SERVER_SETTINGS
    assert set(command[1::2]) == {"-c"}


def test_the_query_api_is_published_on_loopback_at_its_default_port(compose):
    from services.query.settings import QuerySettings

    port = QuerySettings.model_fields["port"].default
    assert compose["services"]["query"]["ports"] == [f"127.0.0.1:{port}:{port}"]


def test_the_collector_receives_otlp_where_the_services_send_it(compose):
    collector = compose["services"]["otel-collector"]
    mounted = {v.split(":")[1]: v.split(":")[0] for v in collector["volumes"]}
    config_path = next(arg.split("=", 1)[1] for arg in collector["command"]
                       if arg.startswith("--config="))
    config = yaml.safe_load((ROOT / mounted[config_path]).read_text("utf-8"))
    endpoint = urlsplit(environment(compose["services"]["dispatcher"])["OTEL_EXPORTER_OTLP_ENDPOINT"])
    assert endpoint.hostname == "otel-collector"
    assert config["receivers"]["otlp"]["protocols"]["grpc"]["endpoint"].endswith(f":{endpoint.port}")
    for pipeline in ("traces", "metrics"):
        assert "otlp" in config["service"]["pipelines"][pipeline]["receivers"]
    assert not any(dep == "otel-collector" and how.get("condition") == "service_healthy"
                   for s in compose["services"].values()
                   for dep, how in (s.get("depends_on") or {}).items())


def test_the_mcp_gateway_waits_for_its_profile(compose):
    """It refuses to start without a tokens file the user makes, which would fail the plain
    `docker compose up --wait` of everything else: it starts only with `--profile mcp`."""
    assert compose["services"]["mcp-gateway"].get("profiles") == ["mcp"]
    assert [n for n, s in compose["services"].items() if s.get("profiles")] == ["mcp-gateway"]
