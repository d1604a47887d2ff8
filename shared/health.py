"""``GET /healthz`` and ``GET /readyz`` of every service process: what Kubernetes' probes and
compose's healthchecks ask.

Liveness is answered by the service's own event loop, so a blocked loop fails it by not
answering; it is also 503 once a task the service cannot work without has ended (a consumer's
fetch loop, the dispatcher's scheduler, the relay's workers), since such a process would stay up
doing nothing. Readiness runs every named check at once, each bounded by ``CHECK_TIMEOUT_S``,
and is 503 while any fails or is not provided yet (a service still waiting for PostgreSQL or
Kafka at start). Both answer small JSON: each check's result, ``ok`` or why not.
``GET /metrics`` is the process's Prometheus exposition (``shared.telemetry``): one port per
process for the probes and the scrape, so a pod declares one port and one network policy.

Served on ``INTENTLEDGER_HEALTH_HOST``:``INTENTLEDGER_HEALTH_PORT``. The image sets the port
(8081); elsewhere it is unset and nothing is served, because tests, the demo and the chaos runner
start several services on one host, where a fixed port would collide; ``0`` takes a free port
(logged).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from contextlib import asynccontextmanager

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, generate_latest
from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

log = logging.getLogger(__name__)
CHECK_TIMEOUT_S = 2.0
"""Under the probes' own timeouts (Kubernetes 3 s, compose 5 s): a slow dependency is reported
as such instead of as a probe that never answered."""

Check = Callable[[], Awaitable[object]]
"""Readiness of one dependency: returns when ready, raises (its message is the reason) if not."""
Tasks = Callable[[], Iterable[asyncio.Future]]


class NotReady(Exception):
    """A check's plain answer, without a traceback's worth of detail."""


class HealthSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="INTENTLEDGER_HEALTH_", extra="ignore")

    host: str = "127.0.0.1"
    port: int | None = Field(default=None, ge=0, le=65535)
    """Unset: no health endpoints (several processes on one host); 0: any free port."""


class Health:
    """One process's checks; the composition root names its readiness checks up front and
    provides each once the thing it checks exists."""

    def __init__(self, service: str, *readiness: str) -> None:
        self.service = service
        self._checks: dict[str, Check | None] = dict.fromkeys(readiness)
        self._vital: dict[str, Tasks] = {}

    def ready_when(self, name: str, check: Check) -> None:
        if name not in self._checks:
            raise KeyError(f"{self.service} declares no readiness check {name!r}")
        self._checks[name] = check

    def vital(self, name: str, tasks: Tasks) -> None:
        """The process is alive only while every one of these tasks runs."""
        self._vital[name] = tasks

    def liveness(self) -> tuple[bool, dict[str, str]]:
        results = {name: _ended(list(tasks())) or "ok" for name, tasks in self._vital.items()}
        return all(result == "ok" for result in results.values()), results

    async def readiness(self) -> tuple[bool, dict[str, str]]:
        names = list(self._checks)
        results = dict(zip(names, await asyncio.gather(*(_run(self._checks[n]) for n in names)),
                           strict=True))
        return all(result == "ok" for result in results.values()), results


@asynccontextmanager
async def serving(health: Health, settings: HealthSettings) -> AsyncIterator[int | None]:
    """The endpoints while inside; yields the bound port (None when not configured)."""
    if settings.port is None:
        yield None
        return

    async def healthz(_: web.Request) -> web.Response:
        return _answer(health, "alive", "dead", health.liveness())

    async def readyz(_: web.Request) -> web.Response:
        return _answer(health, "ready", "not ready", await health.readiness())

    async def metrics(_: web.Request) -> web.Response:
        return web.Response(body=generate_latest(REGISTRY),
                            headers={"Content-Type": CONTENT_TYPE_LATEST})

    app = web.Application()
    app.router.add_get("/healthz", healthz, allow_head=False)
    app.router.add_get("/readyz", readyz, allow_head=False)
    app.router.add_get("/metrics", metrics, allow_head=False)
    runner = web.AppRunner(app, access_log=None, handle_signals=False)
    await runner.setup()
    try:
        await web.TCPSite(runner, settings.host, settings.port).start()
        port = runner.addresses[0][1]
        log.info("%s health endpoints on http://%s:%d (/healthz, /readyz, /metrics)",
                 health.service, settings.host, port)
        yield port
    finally:
        await runner.cleanup()


def _answer(health: Health, good: str, bad: str, outcome: tuple[bool, dict[str, str]]
            ) -> web.Response:
    ok, checks = outcome
    return web.json_response({"service": health.service, "status": good if ok else bad,
                              "checks": checks}, status=200 if ok else 503)


async def _run(check: Check | None) -> str:
    if check is None:
        return "starting"
    try:
        await asyncio.wait_for(check(), CHECK_TIMEOUT_S)
    except TimeoutError:
        return f"no answer within {CHECK_TIMEOUT_S:g} s"
    except Exception as error:  # any failure of a check means "not ready", with its reason
        return str(error) or type(error).__name__
    return "ok"


def _ended(tasks: list[asyncio.Future]) -> str | None:
    """Why the process is dead, a task's failure first; None while every task runs."""
    if not tasks:
        return "not running"
    ended = [task for task in tasks if task.done()]
    errors = [task.exception() for task in ended if not task.cancelled() and task.exception()]
    return f"ended: {errors[0]!r}" if errors else "ended" if ended else None
