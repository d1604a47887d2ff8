"""CPU seconds and memory of every process under test (each service replica, Kafka's JVM,
PostgreSQL's postmaster with its backends, the harness itself) and of the whole machine, so a
step's cost per proposal and any competing load can be told apart."""

from __future__ import annotations

import os
import re
from pathlib import Path

import psutil

from intentledger.chaos.stack import Stack
from shared.config import Settings
from shared.infra import postgres_local
from shared.infra.state import InfraState


class Meter:
    """Cumulative CPU seconds and memory of every process under test (psutil)."""

    def __init__(self) -> None:
        self.processes: dict[str, psutil.Process] = {}
        self.kinds: dict[str, str] = {}
        self.notes: dict[str, str] = {}
        self._machine0 = psutil.cpu_times()

    def add(self, name: str, pid: int | None, kind: str, note: str | None = None) -> None:
        if pid is None:
            self.notes[name] = note or "not measured"
            return
        try:
            self.processes[name] = psutil.Process(pid)
            self.kinds[name] = kind
        except psutil.NoSuchProcess:
            self.notes[name] = f"pid {pid} is not running"

    def add_stack(self, stack: Stack, settings: Settings) -> None:
        """Every replica the stack started, Kafka and PostgreSQL when they are local processes
        of this home, and the harness."""
        for replica in stack.replicas.values():
            assert replica.process is not None
            self.add(replica.label, replica.process.pid, "python")
        self.add_infrastructure(settings)
        self.add("harness", os.getpid(), "python")

    def add_infrastructure(self, settings: Settings) -> None:
        """Kafka and PostgreSQL, when they are local processes of this home."""
        for name, (pid, note) in _infrastructure_pids(settings).items():
            self.add(name, pid, name, note)

    def cpu(self) -> dict[str, float]:
        """Seconds of CPU each process has used since it started (``reading``)."""
        return self.reading()[0]

    def reading(self) -> tuple[dict[str, float], dict[str, int]]:
        """Each process's CPU seconds (user + system) since it started and its resident bytes
        now. PostgreSQL's span the postmaster and its backends, listed once for both figures
        (a /proc walk of some milliseconds with dozens of backends): its CPU counts every
        backend, live (their own times) or ended (reaped into the postmaster's children
        times); its memory is ``resident_tree``'s."""
        used: dict[str, float] = {}
        resident: dict[str, int] = {}
        for name, process in self.processes.items():
            try:
                if self.kinds[name] != "postgres":
                    times = process.cpu_times()
                    used[name] = times.user + times.system
                    resident[name] = process.memory_info().rss
                    continue
                backends = process.children()
                times = process.cpu_times()
                used[name] = times.user + times.system + times.children_user \
                    + times.children_system + sum(map(_cpu_seconds, backends))
                resident[name] = resident_tree([process, *backends])
            except psutil.Error:
                continue
        return used, resident

    def peak_rss(self) -> dict[str, int | None]:
        """The kernel's high-water mark (VmHWM) of each single process; None for PostgreSQL,
        whose many processes share memory (its peak is the largest sampled ``resident_tree``)."""
        peaks: dict[str, int | None] = {}
        for name, process in self.processes.items():
            if self.kinds[name] == "postgres":
                peaks[name] = None
                continue
            try:
                status = Path(f"/proc/{process.pid}/status").read_text()
                found = re.search(r"^VmHWM:\s+(\d+) kB", status, re.MULTILINE)
                peaks[name] = int(found.group(1)) * 1024 if found else None
            except OSError:
                peaks[name] = None
        return peaks

    def machine_busy(self) -> float:
        """CPU seconds the whole machine spent busy (every core, every process) since start."""
        def busy(times) -> float:
            return sum(getattr(times, name, 0.0) for name in ("user", "nice", "system", "irq",
                                                               "softirq", "steal"))
        return busy(psutil.cpu_times()) - busy(self._machine0)


def resident_tree(processes: list[psutil.Process]) -> int:
    """Processes that share memory (PostgreSQL's postmaster and backends, its buffers): each
    one's resident pages that are not shared memory or files, plus the shared ones once, taken
    as the largest shared set any of them has resident. An estimate either way: pages a fork
    left shared count in every process, shared pages that different backends touched count
    as the largest set (read beside the PSS sum on live stacks: 0.88–1.28× it).

    Read from ``statm``, a few microseconds a process. The PSS it replaces counted shared pages
    exactly, but made the kernel walk every backend's page tables: on a warm 40 GB ledger about
    a third of a second of one core every fifth second, on the two cores whose stack the
    harness was measuring (bench/README.md, "The host's pace, and the harness's reading of
    PostgreSQL's memory")."""
    private, shared = 0, 0
    for process in processes:
        try:
            memory = process.memory_info()
        except psutil.Error:
            continue
        private += memory.rss - memory.shared
        shared = max(shared, memory.shared)
    return private + shared


def _cpu_seconds(process: psutil.Process) -> float:
    """A process's CPU seconds; 0 for one that ended meanwhile (the postmaster's children
    times count it once it is reaped)."""
    try:
        times = process.cpu_times()
    except psutil.Error:
        return 0.0
    return times.user + times.system


def _infrastructure_pids(settings: Settings) -> dict[str, tuple[int | None, str | None]]:
    """Kafka's and PostgreSQL's pids when ``infra up`` started them as local processes (the
    state in ``$INTENTLEDGER_HOME/infra.json``); else None and why."""
    home = settings.home.resolve()
    state = InfraState.load(settings.infra_state_file)
    found: dict[str, tuple[int | None, str | None]] = {}
    kafka_pid = state.kafka.pid if state.kafka.mode == "local" else None
    if kafka_pid and psutil.pid_exists(kafka_pid):
        found["kafka"] = (kafka_pid, None)
    else:
        found["kafka"] = (None, f"Kafka is not a local process of {home} (mode "
                                f"{state.kafka.mode}): its CPU is not measured")
    serving = postgres_local.running(home) if state.postgres.mode == "local" else None
    if serving:
        found["postgres"] = (serving[0], None)
    else:
        found["postgres"] = (None, f"PostgreSQL is not a local process of {home} (mode "
                                   f"{state.postgres.mode}): its CPU is not measured")
    return found
