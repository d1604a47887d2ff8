"""Tenant isolation in the database itself: the API's roles queried directly in SQL, as any
future query would run, with no WHERE clause of ours to help."""

from __future__ import annotations

import asyncpg
import pytest

from services.query.access import OPERATOR_ACCESS, TENANT_ROLE, Access, scoped
from shared.db.schemas import migrate_service
from tests.support.query_rows import seed_call, seed_event, seed_run, unique

pytestmark = pytest.mark.infra
TABLES = ("projection.runs", "projection.calls", "projection.events")


@pytest.fixture(scope="module")
async def migrated(pool):
    await migrate_service(pool, "projection")
    await migrate_service(pool, "query")


@pytest.fixture
async def two_tenants(pool, migrated):
    """Tenant A's run with a call and two events; tenant B's run, likewise."""
    a, b = await seed_run(pool, unique("acme")), await seed_run(pool, unique("globex"))
    for run in (a, b):
        call = await seed_call(pool, run, state="UNKNOWN", unknown_for=5)
        await seed_event(pool, run, "ToolAttemptStarted", call=call, attempt=1)
        await seed_event(pool, run, "ToolOutcomeMarkedUnknown", call=call)
    return a, b


async def visible_runs(pool, access: Access, runs) -> dict[str, set[str]]:
    """Per table, which of ``runs`` the access can see, with no filter but the run ids."""
    ids = [run.run_id for run in runs]
    async with scoped(pool, access) as conn:
        return {table: {row["run_id"] for row in await conn.fetch(
            f"SELECT run_id FROM {table} WHERE run_id = ANY($1)", ids)} for table in TABLES}


async def test_a_tenant_sees_only_its_own_runs_calls_and_events_in_sql(pool, two_tenants):
    a, b = two_tenants
    assert await visible_runs(pool, Access(a.tenant), (a, b)) == {t: {a.run_id} for t in TABLES}
    assert await visible_runs(pool, Access(b.tenant), (a, b)) == {t: {b.run_id} for t in TABLES}
    async with scoped(pool, Access(a.tenant)) as conn:
        for table in ("projection.runs", "projection.calls"):
            assert await conn.fetchval(f"SELECT count(DISTINCT tenant_id) FROM {table}") == 1
        assert await conn.fetchval("SELECT count(*) FROM projection.events WHERE run_id = $1",
                                   a.run_id) == 2


async def test_another_tenants_events_under_the_same_run_id_are_not_in_a_tenants_timeline(
        pool, two_tenants):
    """The attack the tenant-less clause allowed: events written into the history under a
    victim's run id. Another tenant's run of that id is a run of its own, shown to it only."""
    a, b = two_tenants
    squatter = await seed_run(pool, b.tenant, run_id=a.run_id)
    planted = await seed_event(pool, squatter, "RunAborted", payload={"reason": "planted"})
    async with scoped(pool, Access(a.tenant)) as conn:
        seen = {row["event_id"] for row in await conn.fetch(
            "SELECT event_id FROM projection.events WHERE run_id = $1", a.run_id)}
        assert seen == set(a.events)
        assert planted not in seen
    async with scoped(pool, Access(b.tenant)) as conn:
        assert await conn.fetchval("SELECT count(*) FROM projection.events WHERE run_id = $1",
                                   a.run_id) == 1


async def test_an_unset_or_unmatched_tenant_sees_nothing(pool, two_tenants):
    for access in (Access(""), Access(unique("nobody"))):
        async with scoped(pool, access) as conn:
            for table in TABLES:
                assert await conn.fetchval(f"SELECT count(*) FROM {table}") == 0, table


async def test_an_operator_sees_every_tenant(pool, two_tenants):
    a, b = two_tenants
    both = {a.run_id, b.run_id}
    assert await visible_runs(pool, OPERATOR_ACCESS, (a, b)) == {t: both for t in TABLES}


async def test_the_roles_cannot_write_nor_bypass_rls_and_tenants_cannot_read_dead_letters(
        pool, two_tenants):
    a, _ = two_tenants
    roles = await pool.fetch("SELECT rolname, rolsuper, rolbypassrls, rolcanlogin FROM pg_roles "
                             "WHERE rolname LIKE 'intentledger_query_%' ORDER BY rolname")
    assert [tuple(role) for role in roles] == [("intentledger_query_operator", False, False, False),
                                               ("intentledger_query_tenant", False, False, False)]
    async with pool.acquire() as conn:
        for statement in ("DELETE FROM projection.runs WHERE run_id = $1",
                          "SELECT count(*) FROM query.dead_letters("
                          "NULL, $1, NULL, NULL, NULL, NULL, NULL, 1)"):
            with pytest.raises(asyncpg.InsufficientPrivilegeError):
                async with conn.transaction():
                    await conn.execute(f"SET LOCAL ROLE {TENANT_ROLE}")
                    await conn.execute("SELECT set_config('intentledger.tenant', $1, true)", a.tenant)
                    await conn.execute(statement, a.run_id)


async def test_the_tenant_setting_ends_with_the_transaction(pool, two_tenants):
    a, _ = two_tenants
    async with pool.acquire() as conn:
        async with conn.transaction():
            await conn.execute(f"SET LOCAL ROLE {TENANT_ROLE}")
            await conn.execute("SELECT set_config('intentledger.tenant', $1, true)", a.tenant)
        assert await conn.fetchval("SELECT current_setting('intentledger.tenant', true)") in ("", None)
        assert await conn.fetchval("SELECT current_user") != TENANT_ROLE
