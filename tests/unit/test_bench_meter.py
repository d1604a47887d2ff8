"""PostgreSQL's CPU and memory in the bench (bench/e2e/meter.py): its processes' private pages
each, their shared pages once, read without walking any page table; its backends listed once a
reading, for both figures."""

from types import SimpleNamespace

import psutil

from bench.e2e.meter import Meter, resident_tree

MB = 2**20


class Backend:
    def __init__(self, rss_mb: int, shared_mb: int, cpu_s: float = 0.0) -> None:
        self.rss, self.shared = rss_mb * MB, shared_mb * MB
        self.cpu_s = cpu_s

    def cpu_times(self) -> SimpleNamespace:
        return SimpleNamespace(user=self.cpu_s, system=0.0)

    def memory_info(self) -> SimpleNamespace:
        return SimpleNamespace(rss=self.rss, shared=self.shared)

    def memory_full_info(self):
        raise AssertionError("the PSS walks every page table of the process")


class Gone:
    def memory_info(self):
        raise psutil.NoSuchProcess(4242)

    cpu_times = memory_info


class Postmaster(Backend):
    """Its children are listed by walking /proc: the test counts the walks."""

    def __init__(self, backends: list) -> None:
        super().__init__(100, 60, cpu_s=1.0)
        self.backends = backends
        self.walks = 0

    def cpu_times(self) -> SimpleNamespace:
        return SimpleNamespace(user=1.0, system=0.5, children_user=2.0, children_system=0.25)

    def children(self) -> list:
        self.walks += 1
        return self.backends


def test_shared_pages_count_once_and_private_pages_each():
    postmaster, busy, idle = Backend(100, 60), Backend(300, 280), Backend(50, 10)
    assert resident_tree([postmaster, busy, idle]) == (40 + 20 + 40 + 280) * MB


def test_a_backend_that_ended_meanwhile_is_left_out():
    assert resident_tree([Backend(100, 60), Gone()]) == 100 * MB


def test_a_reading_lists_postgresql_backends_once_for_cpu_and_memory():
    postmaster = Postmaster([Backend(300, 280, cpu_s=4.0), Gone()])
    meter = Meter()
    meter.processes, meter.kinds = {"postgres": postmaster}, {"postgres": "postgres"}
    cpu, memory = meter.reading()
    assert postmaster.walks == 1
    assert cpu == {"postgres": 1.0 + 0.5 + 2.0 + 0.25 + 4.0}  # ended backends: reaped times
    assert memory == {"postgres": (40 + 20 + 280) * MB}
