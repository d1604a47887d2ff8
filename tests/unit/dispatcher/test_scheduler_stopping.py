"""A stopping dispatcher's scheduler returns as soon as its loops are idle: a SIGTERM, a
rolling deploy and every test that stops a dispatcher waited out each idle loop's wait for a
turn (``scan_interval_s`` × ``concurrency``, 4 s by default) before this."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from services.dispatcher.scheduler import Scheduler
from shared.db.wakeup import Wakeup


async def test_a_stopping_scheduler_returns_without_waiting_out_its_idle_loops():
    settings = SimpleNamespace(scan_interval_s=60.0, concurrency=8)  # idle waits of 480 s
    scheduler = Scheduler(None, None, None, None, settings, None)
    claims = 0

    async def nothing_due(on_claim=lambda: None) -> int:
        nonlocal claims
        claims += 1
        return 0

    scheduler.step_batch = nothing_due
    wakeup = Wakeup("postgresql://never-connected", "test", "channel")
    stopping = asyncio.Event()
    running = asyncio.create_task(scheduler.run(wakeup, stopping))
    while claims < settings.concurrency:  # every loop found nothing and waits for a turn
        await asyncio.sleep(0)

    stopping.set()
    wakeup.wake()  # what Wakeup.run does once stopping is set
    await asyncio.wait_for(running, timeout=10)

    assert claims == settings.concurrency  # no loop claimed again once stopping
