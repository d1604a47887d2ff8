"""Composition root of the query API process: a pool under a login that row-level security
binds (``login``), and the HTTP server (the API and the operator console) until SIGTERM.
Ready once PostgreSQL answers and the projection's and the query's migrations are applied; it
applies none itself (it owns no table: the projection, their owner, applies both). Its only
Kafka client is the console's resolve form, which publishes an operator's resolution."""

from __future__ import annotations

import asyncio

from services.query.console.sessions import Sessions
from services.query.console.settings import ConsoleSettings
from services.query.console.web import Console
from services.query.http_api import Ports, serving
from services.query.login import refuse_unsafe_login
from services.query.settings import QuerySettings
from shared.db.schemas import expect_migrated
from shared.config import Settings
from shared.db.pool import open_pool
from shared.health import Health
from shared.retry import STARTUP_PATIENCE_S, dependency_backoff
from shared.runtime import service_runtime
from shared.signals import stop_on_signals


async def run_query(settings: Settings, query_settings: QuerySettings | None = None,
                    stopping: asyncio.Event | None = None,
                    started: asyncio.Future[Ports] | None = None,
                    console_settings: ConsoleSettings | None = None,
                    resolutions_topic: str | None = None) -> None:
    """Serve until ``stopping`` is set; ``started`` receives the bound ports (tests ask for 0)."""
    query_settings = query_settings or QuerySettings()
    console_settings = console_settings or ConsoleSettings()
    stopping = stopping or stop_on_signals()
    health = Health("query", "postgres", "migrations")  # it reads no Kafka: ready without one
    async with service_runtime(health, settings, query_settings, console_settings):
        async for attempt in dependency_backoff(give_up_after_s=STARTUP_PATIENCE_S, stopping=stopping):
            with attempt:
                pool = await open_pool(settings.endpoints.database_url,
                                       application_name="intentledger-query", reset_sessions=True)
        health.ready_when("postgres", lambda: pool.fetchval("SELECT 1"))
        try:
            await refuse_unsafe_login(pool)
            health.ready_when("migrations", lambda: expect_migrated(pool, "projection", "query"))
            console = Console(console_settings, Sessions(console_settings), settings.endpoints,
                              pool, resolutions_topic or console_settings.resolutions_topic)
            async with serving(pool, query_settings, console) as ports:
                if started is not None:
                    started.set_result(ports)
                await stopping.wait()
        finally:
            await pool.close()
