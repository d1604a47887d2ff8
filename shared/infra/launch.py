"""Start one service in the mode the settings and the machine call for, and record it.

Each ``ensure_*`` leaves the service running (or names the external one) and writes its
pid, ports and endpoint into the state; waiting for readiness is the caller's job, so
Kafka's JVM boots while PostgreSQL is being initialised.
"""

from __future__ import annotations

from pathlib import Path

from shared.config import Settings
from shared.infra import containers, kafka_credentials, kafka_local, postgres_local, processes
from shared.infra.errors import InfraError
from shared.infra.ports import choose, wait_free
from shared.infra.prerequisites import postgres_bindir
from shared.infra.state import InfraState, ServiceState


def say(message: str) -> None:
    print(f"infra: {message}", flush=True)


def kafka_alive(state: InfraState, home: Path) -> bool:
    if state.kafka.mode == "docker":
        return containers.is_running(state.kafka.container_id)
    return processes.is_alive(state.kafka.pid, str(kafka_local.config_file(home)))


def ours(service: ServiceState, endpoint: str | None, running: bool) -> bool:
    """An endpoint given explicitly (exported from an earlier ``up``) that names the service we
    started and still run: it stays ours, so ``down`` still stops it instead of orphaning it."""
    return service.mode == "local" and endpoint == service.endpoint and running


def kafka_login(home: Path, state: InfraState) -> dict[str, str]:
    """What a client of the broker we started logs in with to probe or provision it: the admin
    of a secure broker, nothing on a plain one."""
    if not state.kafka_secure:
        return {}
    return kafka_credentials.load(home).client_kwargs(kafka_credentials.ADMIN)


def ensure_kafka(settings: Settings, home: Path, state: InfraState, taken: set[int]) -> None:
    external = settings.kafka_bootstrap and not ours(state.kafka, settings.kafka_bootstrap,
                                                     kafka_alive(state, home))
    if external and state.kafka_secure:
        raise InfraError(f"a secure broker is started here, not taken from "
                         f"INTENTLEDGER_KAFKA_BOOTSTRAP={settings.kafka_bootstrap}: unset it")
    if external:
        state.kafka = ServiceState(mode="external", endpoint=settings.kafka_bootstrap,
                                   ports=state.kafka.ports)
        say(f"using existing Kafka at {settings.kafka_bootstrap}")
    elif state.kafka.mode != "external" and kafka_alive(state, home):
        say(f"Kafka already running ({_where(state.kafka)}) at {state.kafka.endpoint}")
    elif not state.kafka_secure and docker_wanted(settings):
        say("starting Kafka with testcontainers")
        container_id, bootstrap = containers.start_kafka()
        state.kafka = ServiceState(mode="docker", container_id=container_id, endpoint=bootstrap)
    else:
        start_local_kafka(settings, home, state, taken)


def start_local_kafka(settings: Settings, home: Path, state: InfraState, taken: set[int] | None) -> None:
    """Start the broker; ``taken=None`` demands the recorded ports, as clients already hold them."""
    recorded = state.kafka.ports
    if taken is None:
        port, controller_port = recorded["kafka"], recorded["controller"]
        if busy := wait_free((port, controller_port), timeout=15.0):
            raise InfraError(f"cannot restart Kafka on its ports: {busy} still in use")
    else:
        port = choose([recorded.get("kafka"), settings.kafka_port], taken)
        controller_port = choose([recorded.get("controller"), settings.kafka_controller_port], taken)
    secure = kafka_credentials.load(home) if state.kafka_secure else None
    pid, cluster_id = kafka_local.start(settings, home, port, controller_port, secure)
    state.kafka = ServiceState(mode="local", pid=pid, ports={"kafka": port, "controller": controller_port},
                               endpoint=f"127.0.0.1:{port}")
    state.kafka_cluster_id = cluster_id
    say(f"started Kafka {settings.kafka_version} (local{', secure' if secure else ''}, pid {pid}) "
        f"at 127.0.0.1:{port}, "
        f"cluster {cluster_id}, log {settings.logs_dir.resolve() / 'kafka.log'}")


def ensure_postgres(settings: Settings, home: Path, state: InfraState, taken: set[int]) -> None:
    if settings.database_url and not ours(state.postgres, settings.database_url,
                                          postgres_local.running(home) is not None):
        state.postgres = ServiceState(mode="external", endpoint=settings.database_url,
                                      ports=state.postgres.ports)
        say(f"using existing PostgreSQL at {settings.database_url}")
    elif state.postgres.mode == "docker" and containers.is_running(state.postgres.container_id):
        say(f"PostgreSQL already running (docker) at {state.postgres.endpoint}")
    elif serving := postgres_local.running(home):
        pid, port = serving
        state.postgres = _local_postgres(settings, pid, port)
        say(f"PostgreSQL already running (local, pid {pid}) at {state.postgres.endpoint}")
    elif docker_wanted(settings):
        say("starting PostgreSQL with testcontainers")
        container_id, url = containers.start_postgres(settings.database_name)
        state.postgres = ServiceState(mode="docker", container_id=container_id, endpoint=url)
    else:
        start_local_postgres(settings, home, state, taken)


def start_local_postgres(settings: Settings, home: Path, state: InfraState, taken: set[int] | None) -> None:
    """Start the cluster; ``taken=None`` demands the recorded port, as clients already hold it."""
    if taken is None:
        port = state.postgres.ports["postgres"]
        if busy := wait_free((port,), timeout=15.0):
            raise InfraError(f"cannot restart PostgreSQL on its port: {busy} still in use")
    else:
        port = choose([state.postgres.ports.get("postgres"), settings.postgres_port], taken)
    pid = postgres_local.start(settings, postgres_bindir(), home, port)
    state.postgres = _local_postgres(settings, pid, port)
    say(f"started PostgreSQL (local, pid {pid}) at {state.postgres.endpoint}, "
        f"log {postgres_local.log_file(settings, home)}")


def docker_wanted(settings: Settings) -> bool:
    if settings.infra_mode == "local":
        return False
    available = containers.docker_available()
    if settings.infra_mode == "docker" and not available:
        raise InfraError("INTENTLEDGER_INFRA_MODE=docker but no Docker daemon answers")
    return available


def _local_postgres(settings: Settings, pid: int, port: int) -> ServiceState:
    return ServiceState(mode="local", pid=pid, ports={"postgres": port},
                        endpoint=postgres_local.url(port, settings.database_name))


def _where(service: ServiceState) -> str:
    return f"docker {service.container_id}" if service.mode == "docker" else f"local, pid {service.pid}"
