"""``--transactions-rate`` against the real PostgreSQL: the statement log is switched on for the
step, read back into the transactions a service ran meanwhile, and switched off again."""

import asyncio
from types import SimpleNamespace

import pytest

from bench.e2e.steps import Step
from bench.e2e.transactions import SETTINGS, TransactionLog
from shared.config import Settings
from shared.db.pool import open_pool
from shared.infra import postgres_local

pytestmark = pytest.mark.infra
TRANSACTIONS = 12


async def test_the_step_s_transactions_are_read_back_and_the_log_is_switched_off(
        endpoints, pool, infra_settings):
    settings = infra_settings or Settings()
    log = TransactionLog(SimpleNamespace(profile_s=1.5), pool,  # type: ignore[arg-type]
                         postgres_local.log_file(settings, settings.home))
    service = await open_pool(endpoints.database_url, application_name="intentledger-probe",
                              max_size=1)
    try:
        recording = asyncio.create_task(log.record(Step(0, 10, planned_s=4.0)))
        await asyncio.sleep(1.3)  # the log is on from 1 s into the step, for 1.5 s
        for _ in range(TRANSACTIONS):
            async with service.acquire() as conn, conn.transaction():
                await conn.fetchval("SELECT pg_sleep(0.002)")
        await recording
    finally:
        await service.close()

    assert log.summaries["probe"]["transactions"] == TRANSACTIONS
    [shape] = log.summaries["probe"]["shapes"]
    assert [s["statement"] for s in shape["statements"]] == \
        ["BEGIN;", "SELECT pg_sleep(0.002)", "COMMIT;"]
    assert shape["statements"][1]["exec_ms"] >= 2.0  # PostgreSQL's own duration of the sleep
    assert shape["span_ms"] >= shape["executing_ms"]
    assert not await pool.fetchval(  # the server's own configuration again, for every session
        "SELECT count(*) FROM pg_file_settings WHERE name = ANY($1::text[])"
        " AND sourcefile LIKE '%postgresql.auto.conf'", list(SETTINGS))


async def test_without_the_local_server_s_log_the_summary_says_why(pool, tmp_path):
    log = TransactionLog(SimpleNamespace(profile_s=1.0), pool,  # type: ignore[arg-type]
                         tmp_path / "no-such.log")
    await log.record(Step(0, 10, planned_s=4.0))
    assert "no PostgreSQL log" in log.summaries["error"]
