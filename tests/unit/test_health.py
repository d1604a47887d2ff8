"""The health endpoints in-process: readiness per named check (starting, ok, failing, too slow),
liveness from the vital tasks, 200/503 with small JSON, and no listener unless a port is set."""

from __future__ import annotations

import asyncio

import aiohttp
import pytest

from shared import health as health_module
from shared.health import Health, HealthSettings, NotReady, serving


async def get(port: int, path: str) -> tuple[int, dict]:
    async with aiohttp.ClientSession() as session, \
            session.get(f"http://127.0.0.1:{port}{path}") as response:
        return response.status, await response.json()


async def ok() -> None:
    return None


async def refused() -> None:
    raise NotReady("no partitions assigned")


def test_no_port_outside_the_image(monkeypatch):
    monkeypatch.delenv("INTENTLEDGER_HEALTH_PORT", raising=False)
    monkeypatch.delenv("INTENTLEDGER_HEALTH_HOST", raising=False)
    assert (HealthSettings().host, HealthSettings().port) == ("127.0.0.1", None)


async def test_nothing_listens_without_a_port():
    async with serving(Health("relay"), HealthSettings(port=None)) as port:
        assert port is None


async def test_ready_only_once_every_check_is_provided_and_passes():
    health = Health("wallet", "postgres", "kafka")
    async with serving(health, HealthSettings(port=0)) as port:
        assert await get(port, "/readyz") == (503, {"service": "wallet", "status": "not ready",
                                                    "checks": {"postgres": "starting",
                                                               "kafka": "starting"}})
        health.ready_when("postgres", ok)
        health.ready_when("kafka", refused)
        assert await get(port, "/readyz") == (503, {"service": "wallet", "status": "not ready",
                                                    "checks": {"postgres": "ok",
                                                               "kafka": "no partitions assigned"}})
        health.ready_when("kafka", ok)
        status, body = await get(port, "/readyz")
        assert (status, body["status"]) == (200, "ready")


async def test_a_check_that_does_not_answer_in_time_is_reported_as_such(monkeypatch):
    monkeypatch.setattr(health_module, "CHECK_TIMEOUT_S", 0.05)
    health = Health("relay", "kafka")
    health.ready_when("kafka", lambda: asyncio.sleep(5))
    assert await health.readiness() == (False, {"kafka": "no answer within 0.05 s"})


def test_an_undeclared_check_is_a_programming_error():
    with pytest.raises(KeyError):
        Health("query", "postgres").ready_when("kafka", ok)


async def test_alive_while_the_vital_tasks_run():
    health = Health("dispatcher")
    stop = asyncio.Event()

    async def fails() -> None:
        await stop.wait()
        raise RuntimeError("scheduler died")

    tasks = [asyncio.create_task(stop.wait()), asyncio.create_task(fails())]
    health.vital("background", lambda: tasks)
    async with serving(health, HealthSettings(port=0)) as port:
        assert await get(port, "/healthz") == (200, {"service": "dispatcher", "status": "alive",
                                                     "checks": {"background": "ok"}})
        stop.set()
        await asyncio.gather(*tasks, return_exceptions=True)
        assert await get(port, "/healthz") == (503, {
            "service": "dispatcher", "status": "dead",
            "checks": {"background": "ended: RuntimeError('scheduler died')"}})
    health.vital("background", lambda: [])
    assert health.liveness() == (False, {"background": "not running"})


async def test_a_taken_port_stops_the_service_loudly():
    async with serving(Health("relay"), HealthSettings(port=0)) as port:
        with pytest.raises(OSError):
            async with serving(Health("policy"), HealthSettings(port=port)):
                pass
