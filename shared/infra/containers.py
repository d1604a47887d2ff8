"""Kafka and PostgreSQL in Docker through testcontainers, when a Docker daemon answers.

UNTESTED HERE: the machine this was written on has no Docker engine, so only the
"no daemon" branch has run. The containers must outlive the ``infra up`` command, so
Ryuk (testcontainers' reaper, which removes them when the starting process exits) is
turned off and the container ids go into the state file; ``down`` removes them. Container
data lives in the container: ``down`` loses it whatever ``purge`` says. The docker SDK and
testcontainers come with the ``test`` extra, so they are imported only when used.
"""

from __future__ import annotations

KAFKA_IMAGE = "confluentinc/cp-kafka:7.6.0"
POSTGRES_IMAGE = "postgres:16"


def docker_available(timeout: float = 3.0) -> bool:
    try:
        import docker

        return bool(docker.from_env(timeout=timeout).ping())
    except Exception:  # no SDK, no socket, no daemon: all mean "use local processes"
        return False


def start_kafka() -> tuple[str, str]:
    """(container id, bootstrap) of a KRaft broker; cp-kafka 7.6 waits for "Kafka Server started"."""
    from testcontainers.community.kafka import KafkaContainer

    _keep_containers()
    kafka = KafkaContainer(KAFKA_IMAGE).with_kraft()
    kafka.start(timeout=60)
    return kafka.get_wrapped_container().id, kafka.get_bootstrap_server()


def start_postgres(database: str) -> tuple[str, str]:
    """(container id, plain ``postgresql://`` URL) of a server with ``database`` created."""
    from testcontainers.community.postgres import PostgresContainer

    _keep_containers()
    postgres = PostgresContainer(POSTGRES_IMAGE, username="postgres", password="postgres",
                                 dbname=database, driver=None)
    postgres.start()
    return postgres.get_wrapped_container().id, postgres.get_connection_url()


def is_running(container_id: str | None) -> bool:
    if not container_id:
        return False
    try:
        import docker

        return docker.from_env(timeout=3).containers.get(container_id).status == "running"
    except Exception:  # daemon gone or container removed: not running
        return False


def remove(container_id: str) -> None:
    import docker

    try:
        docker.from_env(timeout=10).containers.get(container_id).remove(force=True, v=True)
    except docker.errors.NotFound:
        pass


def _keep_containers() -> None:
    from testcontainers.core.config import testcontainers_config

    testcontainers_config.ryuk_disabled = True
