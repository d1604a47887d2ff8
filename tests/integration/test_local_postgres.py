"""The PostgreSQL the project's own scripts start (tests, demo, benchmark) runs with the settings
of a deployment, not a packaged server's defaults: what the benchmark measures is what
k8s/base/postgres-cluster.yaml runs."""

import pytest

from shared.infra.postgres_local import SERVER_SETTINGS

pytestmark = pytest.mark.infra


async def test_the_local_cluster_runs_with_a_deployments_settings(infra_settings, pool):
    if infra_settings is None:
        pytest.skip("an external PostgreSQL: its settings are its operator's")
    async with pool.acquire() as conn:
        running = {name: await conn.fetchval("SELECT current_setting($1)", name)
                   for name in SERVER_SETTINGS}
    assert running == SERVER_SETTINGS
