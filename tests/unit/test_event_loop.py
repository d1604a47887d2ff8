"""Service processes run on uvloop (``shared.event_loop``), and the CLI's serve path uses it."""

import asyncio
import inspect

from intentledger import cli
from shared import event_loop


def test_a_service_coroutine_runs_on_uvloop():
    async def loop_module() -> str:
        return type(asyncio.get_running_loop()).__module__

    assert event_loop.run(loop_module()).startswith("uvloop")


def test_every_serve_branch_starts_its_service_through_the_shared_runner():
    source = inspect.getsource(cli.main)
    serve = source[source.index('if args.command == "serve"'):source.index('if args.command == "demo"')]
    assert serve.count("event_loop.run(") == 8
    assert "asyncio.run(" not in serve
