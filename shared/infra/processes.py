"""Detached processes that outlive the command that started them.

``up`` returns while the broker keeps running, so it gets its own session (no terminal
signal reaches it) and writes to a log file, never to our pipes. A pid alone is not
trusted: pids are reused, so liveness also checks the command line.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path

from shared.infra.errors import InfraError


def spawn(command: list[str], log_path: Path, cwd: Path | None = None,
          env: Mapping[str, str] | None = None) -> int:
    """Start ``command`` detached, output appended to ``log_path``; returns its pid. ``env``
    replaces the environment (secrets go there, never into the command line ``ps`` shows).

    A shell backgrounds it and exits at once, so the process is nobody's child of ours:
    nothing to reap, and no Python warning about a subprocess still running at exit.
    """
    log_path.parent.mkdir(parents=True, exist_ok=True)
    launcher = subprocess.run(
        ["/bin/sh", "-c", 'log=$1; shift; "$@" >>"$log" 2>&1 </dev/null & echo $!', "sh", str(log_path),
         *command],
        cwd=cwd, env=env, capture_output=True, text=True, start_new_session=True, check=True)
    return int(launcher.stdout)


def is_alive(pid: int | None, marker: str | None = None) -> bool:
    """True while ``pid`` runs and, given a marker, its command line contains it.

    A killed JVM's main thread turns zombie while its other threads are still exiting;
    until the last of them is gone the process counts as alive.
    """
    if not pid:
        return False
    proc = Path(f"/proc/{pid}")
    try:
        if proc.joinpath("stat").read_text().rsplit(")", 1)[1].split()[0] in ("Z", "X"):
            return len(os.listdir(proc / "task")) > 1
        cmdline = proc.joinpath("cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return False
    return marker is None or marker in cmdline


def stop(pid: int, marker: str, *, hard: bool = False, timeout: float = 15.0) -> None:
    """SIGTERM (the broker's shutdown hook) then SIGKILL after ``timeout``; SIGKILL at once if ``hard``."""
    if not is_alive(pid, marker):
        return
    _signal(pid, signal.SIGCONT)  # a paused process cannot run its shutdown hook
    _signal(pid, signal.SIGKILL if hard else signal.SIGTERM)
    if _gone_within(pid, marker, timeout):
        return
    _signal(pid, signal.SIGKILL)
    if not _gone_within(pid, marker, 5.0):
        raise InfraError(f"process {pid} survived SIGKILL; stop it by hand")


def send(pid: int, marker: str, sig: signal.Signals) -> bool:
    """Signal a process only if it is still the one we started."""
    if not is_alive(pid, marker):
        return False
    _signal(pid, sig)
    return True


def _gone_within(pid: int, marker: str, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while is_alive(pid, marker):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def _signal(pid: int, sig: signal.Signals) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass
