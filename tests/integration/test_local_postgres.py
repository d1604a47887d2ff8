"""The PostgreSQL the project's own scripts start (tests, demo, benchmark) runs with the settings
of a deployment, not a packaged server's defaults: what the benchmark measures is what
k8s/base/postgres-cluster.yaml runs."""

import pytest

from shared.db.plans import hidden
from shared.infra.postgres_local import SERVER_SETTINGS
from tests.support.plans import GENERIC, Explaining, whole_table_reads

pytestmark = pytest.mark.infra


@pytest.fixture(autouse=True)
def local_cluster(infra_settings) -> None:
    if infra_settings is None:
        pytest.skip("an external PostgreSQL: its settings are its operator's")


async def test_the_local_cluster_runs_with_a_deployments_settings(pool):
    async with pool.acquire() as conn:
        running = {name: await conn.fetchval("SELECT current_setting($1)", name)
                   for name in SERVER_SETTINGS}
    assert running == SERVER_SETTINGS


@pytest.mark.parametrize("random_page_cost", [None, "4"])
async def test_a_plan_made_on_a_new_table_looks_keys_up(pool, random_page_cost):
    """A statement planned once per connection (``shared.db.plans``) is planned when a service
    first runs it: on a new deployment, over tables never analysed, which the planner takes
    for ten pages. At a ``random_page_cost`` of 4 (a spinning disk's, the packaged default),
    reading ten pages whole costs less than looking ten keys up, and the plan kept read its
    tables whole until autovacuum first analysed them; at ``SERVER_SETTINGS``' 1.1 it looks the
    keys up. The packaged default is run beside it to show that this test can tell them apart."""
    async with pool.acquire() as conn, conn.transaction():
        if random_page_cost is not None:
            await conn.execute(f"SET LOCAL random_page_cost = {random_page_cost}")
        # Temporary, so that autovacuum never analyses it; of rows a few hundred bytes long,
        # as a call's or a key's are.
        await conn.execute("CREATE TEMP TABLE new_rows (key text PRIMARY KEY, body char(100))"
                           " ON COMMIT DROP")
        explaining = Explaining(conn, modes=(GENERIC,))
        await explaining.fetch(  # type: ignore[arg-type]
            f"SELECT * FROM new_rows WHERE key = ANY({hidden('$1', 'text[]')})", ["k-1", "k-2"])

    reads = whole_table_reads(explaining.plans, {"new_rows"})
    assert (reads == []) == (random_page_cost is None), reads
