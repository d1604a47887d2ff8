"""Outages on purpose, for chaos tests: stop and start the local Kafka broker or PostgreSQL.

Only what ``infra up`` started as a local process can be taken down: its data directory and
ports survive a stop, so a restart brings back the same topics, offsets, tables and
endpoints that running clients hold (they reconnect to the address they already have). An
external service (``INTENTLEDGER_KAFKA_BOOTSTRAP`` / ``INTENTLEDGER_DATABASE_URL``) or a
testcontainers one is refused with an ``InfraError``: it is not ours to stop.

The functions block; under load in async code call them through ``asyncio.to_thread``. Each
holds the home's lock, like ``up`` and ``down``, and keeps ``infra.json`` describing what runs.
"""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path
from typing import Literal

from shared.config import Settings
from shared.infra import kafka_local, postgres_local, processes
from shared.infra.errors import InfraError
from shared.infra.launch import kafka_alive, kafka_login, say, start_local_kafka, start_local_postgres
from shared.infra.prerequisites import postgres_bindir
from shared.infra.readiness import kafka_answers, postgres_answers, wait_until
from shared.infra.state import InfraState, locked

START_DEADLINE_S = 60.0
PostgresStop = Literal["immediate", "fast"]


def stop_kafka(settings: Settings, *, hard: bool = False) -> None:
    """Stop the broker: SIGTERM and a clean shutdown, or ``hard`` SIGKILL like a crash."""
    home = settings.home.resolve()
    with locked(home):
        state = _local(settings, "kafka")
        processes.stop(state.kafka.pid or 0, _marker(home), hard=hard)
        say(f"Kafka stopped ({'SIGKILL' if hard else 'SIGTERM'}, pid {state.kafka.pid})")
        state.kafka.pid = None
        state.save(settings.infra_state_file)


def start_kafka(settings: Settings) -> str:
    """Start the broker again on its recorded ports and data dir; returns its bootstrap once
    it answers a metadata request."""
    home = settings.home.resolve()
    with locked(home):
        state = _local(settings, "kafka")
        if not kafka_alive(state, home):
            start_local_kafka(settings, home, state, taken=None)
            state.save(settings.infra_state_file)
        login = kafka_login(home, state)
        asyncio.run(wait_until(lambda: kafka_answers(state.kafka.endpoint, login=login), "Kafka",
                               START_DEADLINE_S,
                               alive=lambda: kafka_alive(state, home),
                               log_hint=f"; see {settings.logs_dir.resolve() / 'kafka.log'}"))
    return state.kafka.endpoint


def pause_kafka(settings: Settings) -> None:
    """SIGSTOP: connections stay open but nothing answers, like a long GC pause or a partition."""
    _signal(settings, signal.SIGSTOP)


def resume_kafka(settings: Settings) -> None:
    _signal(settings, signal.SIGCONT)


def stop_postgres(settings: Settings, *, mode: PostgresStop = "immediate") -> None:
    """Stop PostgreSQL; returns once the postmaster and every backend are gone.

    ``immediate`` (the default) is the closest to a crash that still lets the same data dir
    restart at once: every backend is killed mid-transaction (clients see ``57P01`` or a reset
    connection), nothing is checkpointed, and the next start replays the WAL (crash recovery),
    so only what was committed survives. SIGKILL of the postmaster would be a truer crash but
    leaves orphaned backends holding the shared memory, and the restart then refuses to run.
    ``fast`` is a clean shutdown: sessions are terminated (``57P01``), a checkpoint is written.
    """
    home = settings.home.resolve()
    with locked(home):
        state = _local(settings, "postgres")
        serving = postgres_local.running(home)
        postgres_local.stop(postgres_bindir(), home, mode=mode)
        say(f"PostgreSQL stopped ({mode}, pid {serving[0] if serving else None})")
        state.postgres.pid = None
        state.save(settings.infra_state_file)


def start_postgres(settings: Settings) -> str:
    """Start PostgreSQL again on its recorded port and data dir (after ``immediate``, crash
    recovery runs first); returns its URL once ``SELECT 1`` runs in the application database."""
    home = settings.home.resolve()
    with locked(home):
        state = _local(settings, "postgres")
        if postgres_local.running(home) is None:
            start_local_postgres(settings, home, state, taken=None)
            state.save(settings.infra_state_file)
        asyncio.run(wait_until(lambda: postgres_answers(state.postgres.endpoint), "PostgreSQL",
                               START_DEADLINE_S, alive=lambda: postgres_local.running(home) is not None,
                               log_hint=f"; see {postgres_local.log_file(settings, home)}"))
    return state.postgres.endpoint


def _signal(settings: Settings, sig: signal.Signals) -> None:
    state = _local(settings, "kafka")
    if not processes.send(state.kafka.pid or 0, _marker(settings.home.resolve()), sig):
        raise InfraError("Kafka is not running")


def _local(settings: Settings, service: Literal["kafka", "postgres"]) -> InfraState:
    """The recorded state, if ``service`` is a local process of ``infra up``; else InfraError."""
    state = InfraState.load(settings.infra_state_file)
    recorded = getattr(state, service)
    name, variable, configured = (
        ("Kafka", "INTENTLEDGER_KAFKA_BOOTSTRAP", settings.kafka_bootstrap) if service == "kafka"
        else ("PostgreSQL", "INTENTLEDGER_DATABASE_URL", settings.database_url))
    if configured and configured != recorded.endpoint:
        raise InfraError(f"{name} is external ({variable}={configured}): only the local one "
                         "started by `infra up` can be stopped")
    if recorded.mode != "local" or service not in recorded.ports:
        where = {"docker": "runs in Docker (testcontainers)",
                 "external": "is external"}.get(recorded.mode, f"was never started under {settings.home}")
        raise InfraError(f"{name} {where}: only the local one started by `infra up` can be stopped")
    return state


def _marker(home: Path) -> str:
    return str(kafka_local.config_file(home))
