"""``bench.idle``'s figures: cores per process over the measured window, the harness left out,
a process that appeared during the window counted from zero, and the whole machine's."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from bench import idle


class Readings:
    """Two snapshots of CPU seconds per process and of the machine's busy seconds."""

    def __init__(self) -> None:
        self.cpus = iter([{"kafka": 1.0, "postgres": 4.0, "harness": 5.0},
                          {"kafka": 1.5, "postgres": 4.1, "relay": 0.2, "harness": 9.0}])
        self.busy = iter([10.0, 11.0])

    def cpu(self) -> dict[str, float]:
        return next(self.cpus)

    def machine_busy(self) -> float:
        return next(self.busy)


def test_cores_are_cpu_seconds_per_second_of_the_window(monkeypatch):
    clock = iter([100.0, 102.0])  # the window: 2 s
    monkeypatch.setattr(idle, "time", SimpleNamespace(monotonic=lambda: next(clock)))
    cores = asyncio.run(idle._cores(Readings(), 0))
    assert cores == {"kafka": 0.25, "postgres": 0.05, "relay": 0.1, "machine": 0.5}
