"""The query API's database login is one that row-level security binds, and the read models'
policies are FORCEd: attacked with the logins a careless deployment would hand the API (the
superuser, a BYPASSRLS role, a member of the tables' owner) and with the owner itself."""

from __future__ import annotations

import asyncio
import uuid

import asyncpg
import pytest

from services.query.login import UnsafeLogin
from services.query.main import run_query
from services.query.settings import QuerySettings
from shared.config import Settings
from shared.db.roles import QUERY_LOGIN
from shared.db.schemas import migrate_all
from shared.infra.postgres_local import login_url
from tests.support.query_api import query_api
from tests.support.query_rows import seed_run, unique

pytestmark = pytest.mark.infra
READ_MODELS = ("projection.runs", "projection.calls", "projection.events")


@pytest.fixture(scope="module")
async def migrated(endpoints):
    await migrate_all(Settings(kafka_bootstrap=endpoints.kafka_bootstrap,
                               database_url=endpoints.database_url))


@pytest.fixture
async def login(pool, migrated):
    """A fresh login role (loopback is trusted), dropped afterwards; the test gives it powers."""
    name = f"il_login_{uuid.uuid4().hex[:8]}"
    await pool.execute(f"CREATE ROLE {name} LOGIN NOSUPERUSER NOBYPASSRLS")
    await pool.execute(f"GRANT CONNECT ON DATABASE {await pool.fetchval('SELECT current_database()')}"
                       f" TO {name}")
    yield name
    await pool.execute(f"REASSIGN OWNED BY {name} TO CURRENT_USER")
    await pool.execute(f"DROP OWNED BY {name}")
    await pool.execute(f"DROP ROLE {name}")


async def start_as(endpoints, login_name: str) -> None:
    """Run the API as ``login_name`` until it is serving (then stop it) or fails at start."""
    settings = Settings(kafka_bootstrap=endpoints.kafka_bootstrap,
                        database_url=login_url(endpoints.database_url, login_name))
    stopping, started = asyncio.Event(), asyncio.get_running_loop().create_future()
    task = asyncio.create_task(run_query(settings, QuerySettings(port=0), stopping, started))
    await asyncio.wait({task, started}, return_when=asyncio.FIRST_COMPLETED, timeout=60)
    stopping.set()
    await task


async def test_the_api_refuses_to_serve_as_a_superuser(endpoints, migrated):
    with pytest.raises(UnsafeLogin, match="superuser"):
        await start_as(endpoints, "postgres")


@pytest.mark.parametrize("power", ["BYPASSRLS", "a member of the tables' owner"])
async def test_the_api_refuses_a_login_that_row_level_security_would_not_bind(
        endpoints, pool, login, power):
    if power == "BYPASSRLS":
        await pool.execute(f"ALTER ROLE {login} BYPASSRLS")
        expected = "BYPASSRLS"
    else:  # may SET ROLE to the owner of projection.runs: as good as owning them
        owner = await pool.fetchval("SELECT pg_get_userbyid(relowner) FROM pg_class "
                                    "WHERE oid = 'projection.runs'::regclass")
        await pool.execute(f"GRANT {owner} TO {login}")
        expected = "the owner of projection.calls, projection.events, projection.runs"
    with pytest.raises(UnsafeLogin, match=expected):
        await start_as(endpoints, login)


async def test_the_query_login_reads_nothing_until_it_switches_to_a_tenant(endpoints, pool, migrated):
    tenant = unique("acme")
    run = await seed_run(pool, tenant)
    conn = await asyncpg.connect(login_url(endpoints.database_url, QUERY_LOGIN))
    try:
        flags = await conn.fetchrow("SELECT rolsuper, rolbypassrls, rolinherit FROM pg_roles "
                                    "WHERE rolname = current_user")
        assert tuple(flags) == (False, False, False)
        for table in READ_MODELS:  # NOINHERIT: its operator membership gives it nothing directly
            with pytest.raises(asyncpg.InsufficientPrivilegeError):
                await conn.fetchval(f"SELECT count(*) FROM {table}")
        async with conn.transaction():
            await conn.execute("SET LOCAL ROLE intentledger_query_tenant")
            await conn.execute("SELECT set_config('intentledger.tenant', $1, true)", tenant)
            assert await conn.fetchval("SELECT array_agg(run_id) FROM projection.runs") == [run.run_id]
    finally:
        await conn.close()


async def test_the_api_serves_as_the_query_login(endpoints, pool, migrated):
    run = await seed_run(pool, unique("acme"))
    async with query_api(endpoints, {"k": run.tenant}) as client:
        status, body = await client.get(f"/v1/runs/{run.run_id}", "k")
    assert status == 200 and body["run"]["run_id"] == run.run_id


async def test_forced_policies_bind_the_tables_owner_too(pool, login):
    """An owner that is not a superuser sees and writes the read models only through the
    policy of ``intentledger_projection_owner``: FORCE, not ownership, decides."""
    run = await seed_run(pool, unique("acme"))
    assert await pool.fetchval("SELECT bool_and(relforcerowsecurity) FROM pg_class "
                               "WHERE oid = ANY($1::regclass[])", list(READ_MODELS))
    await pool.execute(f"GRANT USAGE ON SCHEMA projection TO {login}")
    async with pool.acquire() as conn:
        with pytest.raises(asyncpg.InsufficientPrivilegeError, match="row-level security"):
            async with conn.transaction():  # rolled back: ownership returns to its owner
                await conn.execute(f"ALTER TABLE projection.runs OWNER TO {login}")
                await conn.execute(f"SET LOCAL ROLE {login}")
                assert await conn.fetchval("SELECT count(*) FROM projection.runs "
                                           "WHERE run_id = $1", run.run_id) == 0
                await conn.execute(
                    "INSERT INTO projection.runs (run_id, tenant_id, principal_id, status, calls,"
                    " updated_at, projection_hash, reducer_version) VALUES"
                    " ($1, 'x', 'x', 'RUNNING', 0, now(), 'sha256:x', 'x')", unique("forged"))
        async with conn.transaction():
            await conn.execute(f"ALTER TABLE projection.runs OWNER TO {login}")
            await conn.execute(f"GRANT intentledger_projection_owner TO {login}")
            await conn.execute(f"SET LOCAL ROLE {login}")
            assert await conn.fetchval("SELECT count(*) FROM projection.runs WHERE run_id = $1",
                                       run.run_id) == 1
            await conn.execute("RESET ROLE")
            await conn.execute("ALTER TABLE projection.runs OWNER TO CURRENT_USER")
