"""A stage for faults injected into real dispatcher processes: a relay and the reference wallet
beside them, dispatchers started with fault rules, and a crash followed by a restart."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import pytest

from services.relay.main import run_relay
from services.relay.settings import RelaySettings
from shared import faults
from shared.config import Settings
from shared.operator.publish import publish
from tests.support.dispatch import (Stage, authorization, dispatcher_stage, running_wallet_on,
                                    settled)
from tests.support.processes import ServiceProcess


@pytest.fixture
async def stage(pool, endpoints, tmp_path) -> Stage:
    async with dispatcher_stage(pool, endpoints, tmp_path) as prepared:
        yield prepared


@asynccontextmanager
async def relay_and_wallet(stage: Stage, **wallet) -> AsyncIterator[None]:
    stopping = asyncio.Event()
    settings = Settings(kafka_bootstrap=stage.endpoints.kafka_bootstrap,
                        database_url=stage.endpoints.database_url)
    relay = asyncio.create_task(run_relay(settings, RelaySettings(
        schemas=["dispatcher", "wallet", "warehouse"], poll_interval_s=0.2), stopping))
    try:
        async with running_wallet_on(stage, **wallet):
            yield
    finally:
        stopping.set()
        await relay


def dispatcher(stage: Stage, name: str, *, faults: str = "", **overrides) -> ServiceProcess:
    return ServiceProcess("dispatcher", stage.endpoints, stage.folder / f"{name}.log",
                          faults=faults, env=stage.dispatcher_env(**overrides)).start()


def http_wallet(stage: Stage, port: int, **retry) -> None:
    stage.write_registry(**{"wallet.debit": {
        "adapter": "http", "http_url": f"http://127.0.0.1:{port}",
        "retry": {"max_attempts": 4, "attempt_timeout_seconds": 2, "replay_safe": True,
                  "key_retention_seconds": 86400, **retry}}})


async def crash_then_restart(stage: Stage, pool, intent, crash_point: str,
                             while_down: Callable[[], Awaitable[None]] | None = None, *,
                             hit: int = 1) -> None:
    """A dispatcher that exits at ``crash_point`` on its ``hit``-th pass; ``while_down`` checks
    the world while it is dead; a second dispatcher then settles the call, SUCCEEDED."""
    first = dispatcher(stage, "first", faults=f"{crash_point}=exit@{hit}")
    await publish(stage.endpoints.kafka_bootstrap, stage.authorizations,
                  authorization(intent, stage.write_policy()))
    assert await asyncio.to_thread(first.wait_exit, 60) == faults.EXIT_CODE
    if while_down is not None:
        await while_down()
    second = dispatcher(stage, "second")
    try:
        assert await settled(pool, intent.logical_call_id) == "SUCCEEDED"
    finally:
        second.stop()
