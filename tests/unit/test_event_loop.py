"""Service processes run on uvloop (``shared.event_loop``), and the CLI's serve path uses it."""

import asyncio

from intentledger import cli
from shared import event_loop


def test_a_service_coroutine_runs_on_uvloop():
    async def loop_module() -> str:
        return type(asyncio.get_running_loop()).__module__

    assert event_loop.run(loop_module()).startswith("uvloop")


def test_every_served_service_starts_through_the_shared_runner(monkeypatch):
    """``intentledger serve NAME`` hands NAME's composition root to ``event_loop.run`` (uvloop),
    never to ``asyncio.run``."""
    started = []

    def run(coroutine):
        started.append(coroutine.__qualname__)
        coroutine.close()  # built, not run: no infrastructure needed

    monkeypatch.setattr(event_loop, "run", run)
    monkeypatch.setattr(asyncio, "run", lambda *_: (_ for _ in ()).throw(AssertionError))
    monkeypatch.setattr("shared.logs.configure_logging", lambda *_, **__: None)
    for name, (_, runner) in cli.SERVED.items():
        assert cli.main(["serve", name]) == 0
        assert started[-1] == runner, name
    assert len(started) == len(cli.SERVED) == 9
