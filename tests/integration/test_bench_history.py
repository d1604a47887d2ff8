"""The benchmark's ``--preload`` history, against real PostgreSQL: the rows a seed wrote are
copied under new names (none of them the run's own), with every UUID renamed the same way in
every table so that keys and joins hold, and nothing written before the seed is copied."""

import hashlib
import json
import uuid

import pytest

from bench.e2e.history import copy_history, seed_marker
from bench.e2e.names import RunNames
from shared.ids import new_event_id

pytestmark = pytest.mark.infra
SCHEMA = "history_test"


@pytest.fixture
async def tables(pool):
    await pool.execute(f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE; CREATE SCHEMA {SCHEMA}")
    await pool.execute(f"""
        CREATE TABLE {SCHEMA}.calls (id uuid PRIMARY KEY, run_id text NOT NULL,
            seq bigserial, envelope jsonb NOT NULL, tags text[] NOT NULL, amount int NOT NULL,
            retry_of uuid REFERENCES {SCHEMA}.calls (id), key_digest text NOT NULL UNIQUE);
        CREATE TABLE {SCHEMA}.attempts (event_id text PRIMARY KEY,
            call_id uuid NOT NULL REFERENCES {SCHEMA}.calls (id), kind text NOT NULL,
            UNIQUE (call_id, kind))""")
    yield
    await pool.execute(f"DROP SCHEMA {SCHEMA} CASCADE")


async def _call(pool, names: RunNames, i: int) -> uuid.UUID:
    """A call of run ``i`` of this run's names, and its two attempts."""
    call_id = new_event_id()
    run = f"{names.prefix}-r{i}"
    await pool.execute(
        f"INSERT INTO {SCHEMA}.calls (id, run_id, envelope, tags, amount, key_digest) "
        "VALUES ($1, $2, $3::jsonb, $4, 100, $5)", call_id, run,
        f'{{"run_id": "{run}", "key": "{names.operation_key(i)}"}}', [run],
        f"bench:caller_stated:{hashlib.sha256(names.operation_key(i).encode()).hexdigest()}")
    for kind in ("accepted", "settled"):
        await pool.execute(f"INSERT INTO {SCHEMA}.attempts VALUES ($1, $2, $3)",
                           str(uuid.uuid4()), call_id, kind)
    return call_id


async def test_the_seed_is_copied_under_new_names_with_its_joins(pool, tables):
    names = RunNames(wallets=1)
    before = await _call(pool, names, 0)  # written before the seed: not history to copy
    since = await seed_marker(pool)
    seeds = [await _call(pool, names, i) for i in (1, 2)]
    await pool.execute(f"UPDATE {SCHEMA}.calls SET retry_of = $1 WHERE id = $2", *seeds)

    loaded = await copy_history(pool, names, since, seed_proposals=2, proposals=8,
                                schemas=(SCHEMA,))

    assert loaded["copies"] == 3 and loaded["proposals"] == 8
    calls = await pool.fetch(f"SELECT * FROM {SCHEMA}.calls")
    assert len(calls) == 1 + 2 + 2 * 3
    own = [c for c in calls if c["run_id"].startswith(names.prefix + "-")]
    assert {c["id"] for c in own} == {before, *seeds}  # the run's queries see only its own
    copies = [c for c in calls if c not in own]
    assert len({c["id"] for c in copies}) == 6 and len({c["seq"] for c in calls}) == 9
    assert len({c["key_digest"] for c in calls}) == 9  # a derived key, derived again per copy
    for copy in copies:
        assert json.loads(copy["envelope"])["run_id"] == copy["run_id"] == copy["tags"][0]
        assert copy["run_id"].startswith(f"bench-{names.nonce}h")
        assert copy["id"].hex[:12] in {s.hex[:12] for s in seeds}  # UUIDv7 milliseconds kept
    orphans = await pool.fetchval(
        f"SELECT count(*) FROM {SCHEMA}.attempts e LEFT JOIN {SCHEMA}.calls c ON c.id = e.call_id "
        "WHERE c.id IS NULL")
    assert orphans == 0
    retries = await pool.fetch(f"SELECT c.run_id AS child, p.run_id AS parent FROM {SCHEMA}.calls c "
                               f"JOIN {SCHEMA}.calls p ON p.id = c.retry_of")
    assert len(retries) == 4  # the seed's and each copy's, within its own copy
    assert all(r["child"].split("-r")[0] == r["parent"].split("-r")[0] for r in retries)
    assert await pool.fetchval(f"SELECT count(DISTINCT event_id::uuid) FROM {SCHEMA}.attempts") \
        == 2 * 9  # a UUID kept as text is renamed as one
