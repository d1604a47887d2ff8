"""Broker faults on purpose, for chaos tests: stop, start, pause and resume Kafka.

Only the local broker can be faulted: its data dir and ports survive a stop, so a restart
brings back the same topics, offsets and endpoint that running clients hold. The
functions block; under load in async tests call them through ``asyncio.to_thread``.
"""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

from shared.config import Settings
from shared.infra import kafka_local, processes
from shared.infra.errors import InfraError
from shared.infra.launch import kafka_alive, say, start_local_kafka
from shared.infra.readiness import kafka_answers, wait_until
from shared.infra.state import InfraState, locked

START_DEADLINE_S = 60.0


def stop_kafka(settings: Settings, *, hard: bool = False) -> None:
    """Stop the broker: SIGTERM and a clean shutdown, or ``hard`` SIGKILL like a crash."""
    home = settings.home.resolve()
    with locked(home):
        state = _local_broker(settings)
        processes.stop(state.kafka.pid or 0, _marker(home), hard=hard)
        say(f"Kafka stopped ({'SIGKILL' if hard else 'SIGTERM'}, pid {state.kafka.pid})")
        state.kafka.pid = None
        state.save(settings.infra_state_file)


def start_kafka(settings: Settings) -> str:
    """Start the broker again on its recorded ports and data dir; returns once it answers."""
    home = settings.home.resolve()
    with locked(home):
        state = _local_broker(settings)
        if not kafka_alive(state, home):
            start_local_kafka(settings, home, state, taken=None)
            state.save(settings.infra_state_file)
        asyncio.run(wait_until(lambda: kafka_answers(state.kafka.endpoint), "Kafka", START_DEADLINE_S,
                               alive=lambda: kafka_alive(state, home),
                               log_hint=f"; see {settings.logs_dir.resolve() / 'kafka.log'}"))
    return state.kafka.endpoint


def pause_kafka(settings: Settings) -> None:
    """SIGSTOP: connections stay open but nothing answers, like a long GC pause or a partition."""
    _signal(settings, signal.SIGSTOP)


def resume_kafka(settings: Settings) -> None:
    _signal(settings, signal.SIGCONT)


def _signal(settings: Settings, sig: signal.Signals) -> None:
    state = _local_broker(settings)
    if not processes.send(state.kafka.pid or 0, _marker(settings.home.resolve()), sig):
        raise InfraError("Kafka is not running")


def _local_broker(settings: Settings) -> InfraState:
    state = InfraState.load(settings.infra_state_file)
    if state.kafka.mode != "local" or "kafka" not in state.kafka.ports:
        raise InfraError("Kafka faults need the local broker started by `infra up`")
    return state


def _marker(home: Path) -> str:
    return str(kafka_local.config_file(home))
