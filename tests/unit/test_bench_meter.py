"""PostgreSQL's memory in the bench (bench/e2e/meter.py): its processes' private pages each,
their shared pages once, read without walking any page table."""

from types import SimpleNamespace

import psutil

from bench.e2e.meter import resident_tree

MB = 2**20


class Backend:
    def __init__(self, rss_mb: int, shared_mb: int) -> None:
        self.rss, self.shared = rss_mb * MB, shared_mb * MB

    def memory_info(self) -> SimpleNamespace:
        return SimpleNamespace(rss=self.rss, shared=self.shared)

    def memory_full_info(self):
        raise AssertionError("the PSS walks every page table of the process")


class Gone:
    def memory_info(self):
        raise psutil.NoSuchProcess(4242)


def test_shared_pages_count_once_and_private_pages_each():
    postmaster, busy, idle = Backend(100, 60), Backend(300, 280), Backend(50, 10)
    assert resident_tree([postmaster, busy, idle]) == (40 + 20 + 40 + 280) * MB


def test_a_backend_that_ended_meanwhile_is_left_out():
    assert resident_tree([Backend(100, 60), Gone()]) == 100 * MB
