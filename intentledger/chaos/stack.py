"""The services of one scenario as real operating-system processes, so that faults are real:
an injected exit is ``os._exit``, a kill is SIGKILL, a pause is SIGSTOP.

Each process is started with ``intentledger serve <service>`` and the scenario's environment,
logs to its own file, and counts as ready once it logged that it started consuming (or, for the
relay, publishing). Replicas of a service are numbered from 1.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from shared.config import Endpoints, Settings
from shared.identity import capability_keys

READY_MARK = b" started"
"""Every service logs ``<name> started ...`` once its consumer (or the relay's workers) run."""
START_DEADLINE_S = 60.0
EXIT_POLL_S = 0.05
PER_PROCESS = frozenset({"INTENTLEDGER_HEALTH_PORT", "INTENTLEDGER_FAULTS"})
"""Never inherited from the runner's shell: seven processes on one host cannot share a health
port, and a process's fault rules are the protocol's alone (a protocol may set either)."""


@dataclass
class ServiceProcess:
    """One replica of a service: the OS process it runs now, and the ones before (restarts)."""
    service: str
    number: int
    env: dict[str, str]
    log_path: Path
    process: subprocess.Popen | None = None
    starts: int = 0
    exits: list[int] = field(default_factory=list)
    """Exit statuses of earlier processes of this replica, oldest first."""
    held_down: bool = False
    """Killed on purpose and not to be restarted by its supervisor until released."""
    module: tuple[str, ...] = ()
    """What ``python -m`` runs, when not ``intentledger.cli serve <service>`` (a benchmark's
    stand-in for a service, ``bench/baselines/skeleton_stage.py``)."""

    @property
    def label(self) -> str:
        return self.service if self.number == 1 else f"{self.service}#{self.number}"

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def injected(self, point: str, action: str) -> int:
        """How often this replica's processes injected ``action`` at fault point ``point``,
        as their log says (``shared.faults`` writes a line each time)."""
        mark = f"fault injected: {point} -> {action}\n".encode()
        return self.log_path.read_bytes().count(mark) if self.log_path.exists() else 0


class Stack:
    """Starts, signals, restarts and stops the scenario's processes."""

    def __init__(self, endpoints: Endpoints, logs_dir: Path, scenario: str) -> None:
        self._endpoints = endpoints
        self._logs_dir = logs_dir / "chaos" / scenario
        self._logs_dir.mkdir(parents=True, exist_ok=True)
        self.replicas: dict[tuple[str, int], ServiceProcess] = {}

    def replica(self, service: str, number: int = 1) -> ServiceProcess:
        return self.replicas[(service, number)]

    async def start(self, service: str, env: dict[str, str],
                    module: tuple[str, ...] = ()) -> ServiceProcess:
        """A new replica of ``service`` (the first, or one more); ``module``: see
        ``ServiceProcess.module``."""
        number = 1 + sum(1 for (name, _) in self.replicas if name == service)
        replica = ServiceProcess(service, number, env, self._logs_dir / f"{service}-{number}.log",
                                 module=module)
        replica.log_path.write_bytes(b"")  # one execution per log: fault firings are counted in it
        self.replicas[(service, number)] = replica
        await self.launch(replica)
        return replica

    async def launch(self, replica: ServiceProcess, env: dict[str, str] | None = None) -> None:
        """(Re)start one replica's process and wait until it is ready."""
        if env is not None:
            replica.env = env
        offset = replica.log_path.stat().st_size if replica.log_path.exists() else 0
        inherited = {name: value for name, value in os.environ.items() if name not in PER_PROCESS}
        full_env = {**inherited, **capability_keys.local_environment(Settings()),
                    "INTENTLEDGER_KAFKA_BOOTSTRAP": self._endpoints.kafka_bootstrap,
                    "INTENTLEDGER_DATABASE_URL": self._endpoints.database_url, **replica.env}
        with replica.log_path.open("ab") as log:
            replica.process = subprocess.Popen(
                [sys.executable, "-m", *(replica.module or ("intentledger.cli", "serve",
                                                            replica.service))],
                env=full_env, stdout=log, stderr=subprocess.STDOUT)
        replica.starts += 1
        await self._ready(replica, offset)

    async def _ready(self, replica: ServiceProcess, offset: int) -> None:
        deadline = time.monotonic() + START_DEADLINE_S
        while True:
            with replica.log_path.open("rb") as log:
                log.seek(offset)
                if READY_MARK in log.read():
                    return
            if not replica.running:
                raise RuntimeError(f"{replica.label} exited while starting; see {replica.log_path}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"{replica.label} not ready after {START_DEADLINE_S:.0f} s; "
                                   f"see {replica.log_path}")
            await asyncio.sleep(0.1)

    async def wait_exit(self, replica: ServiceProcess) -> int:
        """Until the current process ends (for an injected exit); returns its status."""
        assert replica.process is not None
        process = replica.process
        while (status := process.poll()) is None:  # polled: a waiting thread per process would
            await asyncio.sleep(EXIT_POLL_S)       # exhaust the default executor
        replica.exits.append(status)
        return status

    def send(self, replica: ServiceProcess, sig: signal.Signals) -> None:
        if not replica.running:
            raise RuntimeError(f"{replica.label} is not running")
        assert replica.process is not None
        replica.process.send_signal(sig)

    async def stop(self) -> None:
        """SIGTERM every process (continuing paused ones first), SIGKILL after 20 s."""
        running = [r for r in self.replicas.values() if r.running]
        for replica in running:
            assert replica.process is not None
            replica.process.send_signal(signal.SIGCONT)
            replica.process.terminate()
        for replica in running:
            assert replica.process is not None
            try:
                await asyncio.to_thread(replica.process.wait, 20)
            except subprocess.TimeoutExpired:
                replica.process.kill()
                await asyncio.to_thread(replica.process.wait)

    def logs(self) -> dict[str, str]:
        return {replica.label: str(replica.log_path) for replica in self.replicas.values()}
