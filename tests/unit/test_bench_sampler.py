"""The bench's sampler reads the meter off the event loop: that loop also timestamps every
answer the agent receives and publishes every proposal on schedule, so a reading of /proc on
it (tens of milliseconds for PostgreSQL's memory) was counted into the latencies measured."""

import asyncio
import threading
from types import SimpleNamespace

from bench.e2e.sampler import Sampler


class LoopBoundMeter:
    """A meter whose reading finishes only once a task on the event loop has run meanwhile:
    read on the loop itself, it waits in vain."""

    def __init__(self) -> None:
        self.loop_ran = threading.Event()
        self.waited_in_vain = False

    def reading(self) -> tuple[dict[str, float], dict[str, int]]:
        self.waited_in_vain = not self.loop_ran.wait(timeout=2.0)
        return {"harness": 1.0}, {"harness": 1}

    def machine_busy(self) -> float:
        return 1.0


class NoProposals(list):
    accepted = settled = 0


class IdlePool:
    async def fetch(self, *_) -> list:
        return []

    async def fetchval(self, *_) -> int:
        return 0


async def _nothing_behind() -> dict[str, int]:
    return {}


async def _no_counters() -> dict[str, int]:
    return {"statements": 0, "commits": 0}


async def test_the_meter_is_read_while_the_event_loop_goes_on():
    meter = LoopBoundMeter()
    timeline: list[dict] = []
    sampler = Sampler(
        config=SimpleNamespace(abort_backlog_s=60),
        pool=IdlePool(),
        backlog=SimpleNamespace(lag=_nothing_behind), meter=meter,
        proposals=NoProposals(),
        load=SimpleNamespace(current=None), watch=SimpleNamespace(check_running=lambda: None),
        statements=SimpleNamespace(counters=_no_counters), pace=SimpleNamespace(latest=7.25),
        timeline=timeline)
    sampling = asyncio.create_task(sampler.sample(asyncio.Event()))

    async def loop_goes_on() -> None:
        while not timeline:
            await asyncio.sleep(0.01)
            meter.loop_ran.set()

    await asyncio.wait_for(loop_goes_on(), timeout=10)
    sampling.cancel()
    assert not meter.waited_in_vain
    assert timeline[0]["cpu_s"] == {"harness": 1.0} and timeline[0]["machine_busy_s"] == 1.0
    assert timeline[0]["pace_ms"] == 7.25
