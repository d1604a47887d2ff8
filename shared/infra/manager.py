"""``up``, ``attach``, ``down`` and ``status`` of the infrastructure every service and test needs.

The functions are synchronous, for the CLI and for pytest fixtures; from async code call
them through ``asyncio.to_thread``. Every call that starts or stops something reads and writes
``<home>/infra.json`` under a lock, so the file always describes what runs, and
``Settings.endpoints`` reads it.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import time
from pathlib import Path
from typing import Any

from shared.config import Endpoints, Settings
from shared.infra import containers, kafka_credentials, kafka_local, kafka_secure, postgres_local, processes
from shared.infra.errors import InfraError
from shared.infra.kafka_secure import SecurePlan
from shared.infra.kafka_tools import Tools
from shared.infra.launch import ensure_kafka, ensure_postgres, kafka_alive, kafka_login, ours, say
from shared.infra.prerequisites import postgres_bindir
from shared.infra.readiness import kafka_answers, postgres_answers, wait_until
from shared.infra.state import LOCK, InfraState, locked

READY_DEADLINE_S = 90.0
"""Generous: a cold JVM on two cores, plus first-time initdb, must fit."""
PURGED = ("kafka-data", "kafka.properties", "kafka-secure", "pgdata", "pg-run", "logs", "infra.json")


def up(settings: Settings, secure: SecurePlan | None = None) -> Endpoints:
    """Start what is not running, wait until both services answer, record the endpoints.

    ``secure``: the broker authenticates and authorizes (``kafka_secure``), provisioned with
    the plan's users, ACLs and topics; their credentials are under ``<home>/kafka-secure``."""
    began, home = time.monotonic(), settings.home.resolve()
    with locked(home):
        state = InfraState.load(settings.infra_state_file)
        _choose_security(home, state, secure)
        taken: set[int] = set()
        try:
            ensure_kafka(settings, home, state, taken)
            ensure_postgres(settings, home, state, taken)
        finally:
            state.save(settings.infra_state_file)  # pids first, so `down` can clean up a failed start
        asyncio.run(_ready(settings, home, state))
        if secure is not None:
            _provision(settings, home, state, secure)
        state.endpoints = {"kafka_bootstrap": state.kafka.endpoint, "database_url": state.postgres.endpoint}
        state.save(settings.infra_state_file)
    say(f"ready in {time.monotonic() - began:.1f} s")
    return Endpoints(**state.endpoints)


def attach(settings: Settings) -> Endpoints:
    """The endpoints of the environment when it names both services, else ``up``'s: a benchmark
    or a chaos run attaches to what it is pointed at and starts nothing, and starts both
    itself when pointed at nothing."""
    if settings.kafka_bootstrap and settings.database_url:
        return settings.endpoints
    return up(settings)


def _choose_security(home: Path, state: InfraState, secure: SecurePlan | None) -> None:
    """A data directory keeps the mode it was formatted in: its users and ACLs live in it."""
    formatted = kafka_local.recorded_cluster_id(home) is not None
    if formatted and state.kafka_secure != (secure is not None):
        mode = "secure" if state.kafka_secure else "plain"
        raise InfraError(f"the Kafka data in {home} was made {mode}: "
                         f"run `infra up{' --secure' if state.kafka_secure else ''}`, "
                         "or `infra down --purge` first")
    if secure is not None:
        kafka_credentials.ensure(home, secure.users)
        state.kafka_secure = True


def _provision(settings: Settings, home: Path, state: InfraState, plan: SecurePlan) -> None:
    bootstrap = state.kafka.endpoint
    assert bootstrap is not None
    credentials = kafka_credentials.load(home)
    tools = Tools(kafka_local.java(), kafka_local.ensure_jars(settings), home, bootstrap,
                  kafka_local.LOG4J2)
    kafka_credentials.write_client_files(home, credentials, bootstrap)
    say(f"secure Kafka: {kafka_secure.provision(tools, credentials, plan, bootstrap)}; "
        f"credentials in {kafka_credentials.folder(home)}")


def down(settings: Settings, purge: bool = False) -> None:
    """Stop what we started (never an external service); ``purge`` also deletes its data."""
    home = settings.home.resolve()
    with locked(home):
        state = InfraState.load(settings.infra_state_file)
        if state.kafka.mode == "local" and state.kafka.pid:
            processes.stop(state.kafka.pid, str(kafka_local.config_file(home)))
        if postgres_local.running(home):
            postgres_local.stop(postgres_bindir(), home)
        for service in (state.kafka, state.postgres):
            if service.mode == "docker" and service.container_id:
                containers.remove(service.container_id)
            service.pid = service.container_id = None
        state.endpoints = {}
        if purge:
            _purge(home)
        else:
            state.save(settings.infra_state_file)
    if purge:
        (home / LOCK).unlink(missing_ok=True)
        with contextlib.suppress(OSError):
            home.rmdir()  # only if nothing else lives there
    say(f"stopped{' and purged ' + str(home) if purge else ''}")


def status(settings: Settings) -> dict[str, dict[str, Any]]:
    """Per service: mode, pid, alive (None when external: not ours to watch), ready, endpoint."""
    home = settings.home.resolve()
    state = InfraState.load(settings.infra_state_file)
    views = {"kafka": _kafka_view(settings, home, state), "postgres": _postgres_view(settings, home, state)}
    ready = asyncio.run(_probe(views, kafka_login(home, state)))
    return {name: {"mode": mode, "pid": pid, "alive": alive, "ready": ready[name], "endpoint": endpoint}
            for name, (mode, pid, alive, endpoint) in views.items()}


View = tuple[str, int | None, bool | None, str | None]


def _kafka_view(settings: Settings, home: Path, state: InfraState) -> View:
    alive = kafka_alive(state, home)
    if settings.kafka_bootstrap and not ours(state.kafka, settings.kafka_bootstrap, alive):
        return "external", None, None, settings.kafka_bootstrap
    return state.kafka.mode, state.kafka.pid if alive else None, alive, state.kafka.endpoint


def _postgres_view(settings: Settings, home: Path, state: InfraState) -> View:
    serving = postgres_local.running(home)
    if settings.database_url and not ours(state.postgres, settings.database_url,
                                          serving is not None):
        return "external", None, None, settings.database_url
    if state.postgres.mode == "docker":
        return "docker", None, containers.is_running(state.postgres.container_id), state.postgres.endpoint
    return "local", serving[0] if serving else None, serving is not None, state.postgres.endpoint


async def _probe(views: dict[str, View], login: dict[str, str]) -> dict[str, bool]:
    async def answers(name: str, alive: bool | None, endpoint: str | None) -> bool:
        if alive is False or not endpoint:
            return False
        if name == "kafka":
            return await kafka_answers(endpoint, login=login)
        return await postgres_answers(endpoint)

    results = await asyncio.gather(*(answers(name, view[2], view[3]) for name, view in views.items()))
    return dict(zip(views, results, strict=True))


async def _ready(settings: Settings, home: Path, state: InfraState) -> None:
    kafka, postgres = state.kafka, state.postgres
    kafka_log = f"; see {settings.logs_dir.resolve() / 'kafka.log'}"

    async def postgres_ready() -> None:
        if postgres.mode == "local":
            await postgres_local.ensure_database(postgres.ports["postgres"], settings.database_name)
        await wait_until(lambda: postgres_answers(postgres.endpoint), "PostgreSQL", READY_DEADLINE_S)

    login = kafka_login(home, state)
    await asyncio.gather(
        wait_until(lambda: kafka_answers(kafka.endpoint, login=login), "Kafka", READY_DEADLINE_S,
                   alive=(lambda: kafka_alive(state, home)) if kafka.mode == "local" else None,
                   log_hint=kafka_log if kafka.mode == "local" else ""),
        postgres_ready())


def _purge(home: Path) -> None:
    """Delete only what ``up`` creates: ``home`` may be a directory holding other things."""
    if (root := postgres_local.server_root(home)) != home:
        shutil.rmtree(root, ignore_errors=True)
    for name in PURGED:
        path = home / name
        if path.is_dir():
            shutil.rmtree(path)
        else:
            path.unlink(missing_ok=True)
