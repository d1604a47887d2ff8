"""Is a service really serving? Answered by a request, never by an open port alone.

An HTTP service is ready when its health URL answers 200.
Kafka is ready when it answers a metadata request (what every client does first);
PostgreSQL when ``pg_isready`` says it accepts connections and ``SELECT 1`` runs in the
application's database. Each wait has a deadline and gives up early when the process
we started has died, pointing at its log instead of timing out silently.

The brokers probed here are those ``infra up`` started: a plain one on its PLAINTEXT listener, a
secure one as its admin (``login``); a deployment's Kafka security settings
(``shared.messaging.kafka_security``) do not apply to them.
"""

from __future__ import annotations

import asyncio
import shutil
import time
from collections.abc import Awaitable, Callable

import aiohttp
import asyncpg
from aiokafka.admin import AIOKafkaAdminClient

from shared.infra.errors import InfraError

Alive = Callable[[], bool]


async def kafka_answers(bootstrap: str, timeout: float = 3.0, login: dict[str, str] | None = None
                        ) -> bool:
    host, _, port = bootstrap.split(",")[0].rpartition(":")
    if not await _port_open(host, int(port), timeout):
        return False  # spares aiokafka's connection-error logging while the broker boots
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=int(timeout * 1000),
                                **(login or {}))
    try:
        await asyncio.wait_for(_list_topics(admin), timeout)
        return True
    except Exception:  # any failure of the probe means "not ready yet"
        return False
    finally:
        await admin.close()


async def postgres_answers(url: str, timeout: float = 3.0) -> bool:
    if tool := shutil.which("pg_isready"):  # a client-only machine may lack it; SELECT 1 decides then
        probe = await asyncio.create_subprocess_exec(
            tool, "-q", "-t", str(max(1, int(timeout))), "-d", url,
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL)
        if await probe.wait() != 0:
            return False
    try:
        connection = await asyncpg.connect(url, timeout=timeout)
    except Exception:  # refused, starting up, database missing: not ready
        return False
    try:
        return await connection.fetchval("SELECT 1", timeout=timeout) == 1
    finally:
        await connection.close()


async def http_answers(url: str, timeout: float = 3.0) -> bool:
    """The URL answers 200 (a health or readiness endpoint)."""
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout)) as session, \
                session.get(url) as answer:
            return answer.status == 200
    except (aiohttp.ClientError, TimeoutError):
        return False


async def wait_until(check: Callable[[], Awaitable[bool]], what: str, deadline_s: float,
                     alive: Alive | None = None, log_hint: str = "") -> None:
    """Poll ``check`` until it is true, the process dies, or time runs out."""
    deadline = time.monotonic() + deadline_s
    while not await check():
        if alive is not None and not alive():
            raise InfraError(f"{what} exited during start-up{log_hint}")
        if time.monotonic() > deadline:
            raise InfraError(f"{what} not ready after {deadline_s:.0f} s{log_hint}")
        await asyncio.sleep(0.25)


async def _list_topics(admin: AIOKafkaAdminClient) -> None:
    await admin.start()
    await admin.list_topics()


async def _port_open(host: str, port: int, timeout: float) -> bool:
    try:
        _, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout)
    except (OSError, TimeoutError):
        return False
    writer.close()
    await writer.wait_closed()
    return True
