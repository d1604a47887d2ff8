"""What a batch of proposals is decided against, read in one statement
(``repository.runs_and_calls_named``), against real PostgreSQL: the runs its calls name,
locked until the batch's transaction ends, and the intents holding its keys or call ids, with
the tombstones of expired keys among them."""

import uuid

import asyncpg
import pytest

from services.proposal_intake.repository import SCHEMA, runs_and_calls_named
from shared.db.schemas import migrate_service
from shared.runs import RunKey

pytestmark = pytest.mark.infra


@pytest.fixture
async def history(pool):
    """A run with one intent; another tenant's run of the same id; a key expired to its
    tombstone. Committed, so that another session can try the run's lock; deleted afterwards."""
    await migrate_service(pool, "proposal_intake")
    suffix = uuid.uuid4().hex[:8]
    run, intent = f"reads-{suffix}", uuid.uuid4()
    async with pool.acquire() as conn:
        await conn.execute(
            f"INSERT INTO {SCHEMA}.runs (run_id, tenant_id, principal_id, deadline_at, max_calls,"
            " max_attempts, call_count) VALUES ($1, 'acme', 'agent-7', now(), 100, 10, 1),"
            " ($1, 'globex', 'agent-9', now(), 100, 10, 4)", run)
        await conn.execute(
            f"INSERT INTO {SCHEMA}.logical_calls (logical_call_id, operation_key, run_id,"
            " provider, provider_call_id, tool_name, tool_version, arguments_hash,"
            " canonical_arguments, principal_id, tenant_id, state, version) VALUES ($1, $2, $3,"
            " 'generic', 'call-1', 'wallet.debit', '1', 'h-1', '{}', 'agent-7', 'acme',"
            " 'VALIDATED', 1)", intent, f"key-{suffix}", run)
        await conn.execute(
            f"INSERT INTO {SCHEMA}.expired_keys (operation_key, logical_call_id, tenant_id, run_id,"
            " tool_name, proposed_at) VALUES ($1, $2, 'acme', $3, 'wallet.debit',"
            " now() - interval '1 day')", f"gone-{suffix}", uuid.uuid4(), run)
    yield {"run": RunKey("acme", run), "intent": intent, "suffix": suffix}
    async with pool.acquire() as conn:
        await conn.execute(f"DELETE FROM {SCHEMA}.logical_calls WHERE run_id = $1", run)
        await conn.execute(f"DELETE FROM {SCHEMA}.expired_keys WHERE run_id = $1", run)
        await conn.execute(f"DELETE FROM {SCHEMA}.runs WHERE run_id = $1", run)


async def test_the_runs_are_locked_and_the_intents_found_by_key_by_call_id_or_tombstone(
        pool, endpoints, history):
    run, suffix = history["run"], history["suffix"]
    fresh = RunKey("acme", f"fresh-{suffix}")
    async with pool.acquire() as conn, conn.transaction():
        runs, calls = await runs_and_calls_named(
            conn, [run, fresh], [f"key-{suffix}", f"gone-{suffix}", f"never-{suffix}"],
            [(run, "call-1"), (fresh, "call-1")])

        assert [(row["tenant_id"], row["run_id"], row["call_count"]) for row in runs] == [
            ("acme", run.run_id, 1)]  # not globex's run of the same id, nor a run never begun
        by_key = {row["operation_key"]: row for row in calls}
        assert len(calls) == 2  # the intent once, though its key and its call id both name it
        assert by_key[f"key-{suffix}"]["logical_call_id"] == history["intent"]
        assert by_key[f"key-{suffix}"]["state"] == "VALIDATED"
        assert by_key[f"key-{suffix}"]["provider_call_id"] == "call-1"
        assert by_key[f"key-{suffix}"]["expired_at"] is None
        assert by_key[f"gone-{suffix}"]["expired_at"] is not None

        other = await asyncpg.connect(endpoints.database_url)
        try:
            with pytest.raises(asyncpg.LockNotAvailableError):
                await other.execute(f"SELECT FROM {SCHEMA}.runs WHERE tenant_id = 'acme' AND"
                                    " run_id = $1 FOR UPDATE NOWAIT", run.run_id)
            await other.execute(f"SELECT FROM {SCHEMA}.runs WHERE tenant_id = 'globex' AND"
                                " run_id = $1 FOR UPDATE NOWAIT", run.run_id)  # not locked
        finally:
            await other.close()


async def test_with_no_runs_asked_for_the_key_alone_is_looked_up(pool, history):
    async with pool.acquire() as conn:
        runs, calls = await runs_and_calls_named(conn, [], [f"key-{history['suffix']}"], [])
    assert runs == []
    assert [row["logical_call_id"] for row in calls] == [history["intent"]]
