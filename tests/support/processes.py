"""Services as real OS processes, so crashes are real: ``os._exit``, SIGKILL, SIGTERM."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from shared.config import Endpoints


class ServiceProcess:
    started: list[ServiceProcess] = []
    """Every process started and not yet found stopped by ``stop_strays``."""

    def __init__(self, service: str, endpoints: Endpoints, log_path: Path, *,
                 faults: str = "", env: dict[str, str] | None = None) -> None:
        self.service = service
        self.log_path = log_path
        self._env = {
            **os.environ,
            "INTENTLEDGER_KAFKA_BOOTSTRAP": endpoints.kafka_bootstrap,
            "INTENTLEDGER_DATABASE_URL": endpoints.database_url,
            "INTENTLEDGER_FAULTS": faults,
            **(env or {}),
        }
        self.process: subprocess.Popen | None = None

    def start(self) -> ServiceProcess:
        log = self.log_path.open("ab")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "intentledger.cli", "serve", self.service],
            env=self._env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        ServiceProcess.started.append(self)
        return self

    def kill9(self) -> int:
        self.process.send_signal(signal.SIGKILL)
        return self.process.wait(10)

    def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM, and the exit code. A process that does not stop in time is killed before
        the test fails on it: left running, it would go on working on the shared tables under
        the tests that follow."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill9()
            raise

    def wait_exit(self, timeout: float) -> int | None:
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def log_lines(self) -> list[dict]:
        lines = []
        for raw in self.log_path.read_text(errors="replace").splitlines():
            try:
                lines.append(json.loads(raw))
            except ValueError:
                lines.append({"msg": raw})
        return lines

    def wait_for_log(self, text: str, timeout: float = 30.0) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if any(text in line.get("msg", "") for line in self.log_lines()):
                return True
            if self.process.poll() is not None:
                return False
            time.sleep(0.1)
        return False


def stop_strays() -> list[str]:
    """Kill every service process a test started and left running; their logs, for the test's
    failure. Left running, one works on the shared tables under the tests that follow (a
    dispatcher steps their calls with its own registry and settings)."""
    strays = [process for process in ServiceProcess.started if process.process.poll() is None]
    for process in strays:
        process.kill9()
    ServiceProcess.started.clear()
    return [str(process.log_path) for process in strays]


def relay_env(schema: str, **overrides: object) -> dict[str, str]:
    env = {"INTENTLEDGER_RELAY_SCHEMAS": json.dumps([schema])}
    env.update({f"INTENTLEDGER_RELAY_{k.upper()}": str(v) for k, v in overrides.items()})
    return env
