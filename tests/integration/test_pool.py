"""Pooled connections go back without asyncpg's session reset (``shared.db.pool``): what is
transaction-scoped still ends with the transaction, and an open transaction is still rolled
back; only session state would survive, which is why no service leaves any."""

import pytest

from shared.db.pool import open_pool

pytestmark = pytest.mark.infra


async def _one_connection_pool(endpoints, **options):
    return await open_pool(endpoints.database_url, application_name="intentledger-tests-pool",
                           min_size=1, max_size=1, **options)


async def test_transaction_scoped_state_ends_with_the_transaction(endpoints):
    pool = await _one_connection_pool(endpoints)
    try:
        async with pool.acquire() as conn, conn.transaction():
            await conn.execute("SET LOCAL lock_timeout = '4321ms'")
            assert await conn.fetchval("SELECT pg_try_advisory_xact_lock(4242)")
        async with pool.acquire() as conn:
            assert await conn.fetchval("SHOW lock_timeout") == "0"
            assert await conn.fetchval(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'"
                " AND pid = pg_backend_pid()") == 0
    finally:
        await pool.close()


async def test_a_transaction_left_open_is_rolled_back_on_release(endpoints):
    pool = await _one_connection_pool(endpoints)
    try:
        async with pool.acquire() as conn:
            await conn.execute("CREATE TEMP TABLE IF NOT EXISTS left_open (n int)")
            transaction = conn.transaction()
            await transaction.start()
            await conn.execute("INSERT INTO left_open VALUES (1)")
        async with pool.acquire() as conn:
            assert not conn.is_in_transaction()
            assert await conn.fetchval("SELECT count(*) FROM left_open") == 0
    finally:
        await pool.close()


@pytest.mark.parametrize("reset_sessions, survives", [(False, True), (True, False)])
async def test_session_state_survives_release_only_without_the_reset(endpoints, reset_sessions,
                                                                     survives):
    """The trade made for one round trip per transaction, shown both ways."""
    pool = await _one_connection_pool(endpoints, reset_sessions=reset_sessions)
    try:
        async with pool.acquire() as conn:
            await conn.execute("SET statement_timeout = '4321ms'")
        async with pool.acquire() as conn:
            assert (await conn.fetchval("SHOW statement_timeout") == "4321ms") is survives
    finally:
        await pool.close()
