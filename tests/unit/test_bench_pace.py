"""The host's pace (bench/e2e/pace.py): a fixed loop timed in CPU time, read from a child
process that ends with the run."""

import asyncio
import time

from bench.e2e.pace import Pace, timed_work


def test_the_work_is_timed_in_cpu_time_not_wall_time():
    began = time.perf_counter()
    took_ms = timed_work()
    wall_ms = (time.perf_counter() - began) * 1000
    assert 0 < took_ms <= wall_ms + 0.5


async def test_readings_arrive_and_the_child_ends_on_stop():
    pace = Pace(every_s=0.05)
    assert pace.latest is None
    await pace.start()
    readings = set()
    try:
        async with asyncio.timeout(20):
            while len(readings) < 5:
                await asyncio.sleep(0.01)
                if pace.latest is not None:
                    readings.add(pace.latest)
    finally:
        await pace.stop()
    assert all(reading > 0 for reading in readings)
    assert pace._child is not None and pace._child.returncode is not None
    assert pace.latest is None  # a stopped child's last reading is not passed off as current
