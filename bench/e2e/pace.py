"""The host's pace: a fixed piece of interpreter work, timed in its own process's CPU time once
a second, so a figure per proposal can be read against how fast this machine ran meanwhile.

Why: the machine is a guest on a shared host, and the same Python costs it different CPU time
from one second to the next. Timed this way on 2026-12-06, twice the loop below took 6.4 to
12.2 ms: on the idle guest 6.9 ms in some seconds and 11–12 ms in most, 7–8.5 ms with the
stack at 10 proposals/s, about 7 ms at saturation. Hashing a megabyte in C moved by 1.15× at most,
which points at the state of the core that interpreted code leans on (caches and branch
predictors, used by other guests while this one halted) rather than at its clock rate. Every
service here is interpreted code woken by each record, so a step's CPU per proposal moves with
the pace, and two runs of one A/B may run at different paces.

The work runs in a child process, not in the harness: a thread would hold the harness's GIL
for milliseconds, the very pauses its event loop must not take (``sampler.py``). The child's
CPU (under 1% of a core) counts under "other processes".
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
import time

WORK = 25_000
"""Iterations of the timed loop: about 2–3 ms of one core, long enough for the clock's
resolution, short enough to take under 1% of a core at one reading a second."""


def timed_work() -> float:
    """Milliseconds of this thread's CPU time the fixed loop took."""
    began = time.thread_time()
    total = 0
    for i in range(WORK):
        total += i * i
    return (time.thread_time() - began) * 1000


class Pace:
    """The child process and its latest reading (``None`` until the first arrives, and once
    the child has ended)."""

    def __init__(self, every_s: float = 1.0) -> None:
        self.every_s = every_s
        self.latest: float | None = None
        self._child: asyncio.subprocess.Process | None = None
        self._reader: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self._child = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "bench.e2e.pace", "--every", str(self.every_s),
            stdout=asyncio.subprocess.PIPE)
        self._reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        assert self._child is not None and self._child.stdout is not None
        async for line in self._child.stdout:
            self.latest = float(line)
        self.latest = None  # the child ended: no reading is current any more

    async def stop(self) -> None:
        if self._child is None:
            return
        with contextlib.suppress(ProcessLookupError):
            self._child.terminate()
        await self._child.wait()
        if self._reader is not None:
            await asyncio.gather(self._reader, return_exceptions=True)


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.e2e.pace")
    parser.add_argument("--every", type=float, default=1.0, help="seconds between readings")
    every = parser.parse_args(argv).every
    while True:
        time.sleep(every)
        print(f"{timed_work():.3f}", flush=True)


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt, BrokenPipeError):
        main(sys.argv[1:])
