"""The benchmark's count of PostgreSQL's statements against the real server: planning is counted
for the run, each statement's planning is reported beside its execution, and the server's own
setting is back afterwards."""

import pytest

from bench.e2e.statements import TRACK_PLANNING, Statements
from shared.db.pool import open_pool

pytestmark = pytest.mark.infra
PROBE = "SELECT count(*) FROM pg_class WHERE oid = ANY($1::oid[])"


async def test_planning_is_counted_for_the_run_and_the_setting_reset_after_it(endpoints, pool):
    statements = Statements(pool)
    await statements.start()
    assert statements.available and statements.tracks_planning
    service = await open_pool(endpoints.database_url, application_name="intentledger-probe",
                              max_size=1)
    try:
        for size in range(1, 9):
            await service.fetchval(PROBE, list(range(size)))
    finally:
        await service.close()

    [probe] = [entry for entry in await statements.most_called(settled=8)
               if entry["query"] == PROBE]
    assert probe["calls"] == 8
    assert probe["plans"] >= 5  # the first five executions of a prepared statement are planned
    assert probe["plan_ms"] > 0
    spent = await statements.time_spent(settled=8)
    assert spent["plan_ms_per_settled"] > 0 and spent["plans_per_settled"] >= 5 / 8
    assert all(isinstance(value, float) for value in spent.values())  # numbers in e2e.json

    assert await statements.stop() is None
    assert not statements.tracks_planning
    assert not await pool.fetchval(  # the server's own configuration again, for every session
        "SELECT count(*) FROM pg_file_settings WHERE name = $1"
        " AND sourcefile LIKE '%postgresql.auto.conf'", TRACK_PLANNING)
    fresh = await open_pool(endpoints.database_url, application_name="intentledger-probe",
                            max_size=1)
    try:
        assert await fresh.fetchval(f"SHOW {TRACK_PLANNING}") == "off"
    finally:
        await fresh.close()
