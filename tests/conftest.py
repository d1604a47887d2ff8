"""Test session wiring: real Kafka and PostgreSQL, started once per session.

Order of preference: endpoints given by environment (INTENTLEDGER_KAFKA_BOOTSTRAP and
INTENTLEDGER_DATABASE_URL), else the local processes of ``shared.infra`` (or testcontainers
where a Docker daemon answers), started into ``.intentledger/test`` (or
INTENTLEDGER_TEST_HOME, so two sessions on one machine do not share a broker) and stopped at
the end.
With INTENTLEDGER_REQUIRE_INFRA=1 (CI) a skipped infrastructure test counts as a failure.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from shared.config import Endpoints, Settings
from shared.db.pool import open_pool
from tests.support import identities, processes, query_rows

ROOT = Path(__file__).resolve().parent.parent
# Tests start many service processes on this host: a health port exported in the shell would make
# them collide (a test that wants the endpoints sets a free port for its own process).
os.environ.pop("INTENTLEDGER_HEALTH_PORT", None)
identities.local()  # every intake of the session, in this process or a child, verifies with it


@pytest.fixture(scope="session")
def infra_settings() -> Settings | None:
    """The settings of locally managed infrastructure, or None when it is external."""
    if os.environ.get("INTENTLEDGER_KAFKA_BOOTSTRAP") and os.environ.get("INTENTLEDGER_DATABASE_URL"):
        yield None
        return
    from shared import infra

    settings = Settings(home=_test_home(), kafka_port=0, kafka_controller_port=0, postgres_port=0)
    infra.up(settings)
    yield settings
    infra.down(settings)


@pytest.fixture(scope="session")
def secure_kafka():
    """An authorizing broker (SCRAM logins, least-privilege ACLs) and a PostgreSQL of its own,
    under ``<test home>/secure``: started by the first test that asks, never by the others."""
    from shared import infra
    from tests.support import secure_kafka

    broker = secure_kafka.start(_test_home())
    yield broker
    infra.down(broker.settings)


def _test_home() -> Path:
    return Path(os.environ.get("INTENTLEDGER_TEST_HOME") or ROOT / ".intentledger" / "test")


@pytest.fixture(scope="session")
def endpoints(infra_settings: Settings | None) -> Endpoints:
    if infra_settings is None:
        return Endpoints(kafka_bootstrap=os.environ["INTENTLEDGER_KAFKA_BOOTSTRAP"],
                         database_url=os.environ["INTENTLEDGER_DATABASE_URL"])
    return infra_settings.endpoints


@pytest.fixture(scope="session")
async def pool(endpoints: Endpoints):
    pool = await open_pool(endpoints.database_url, application_name="intentledger-tests",
                           max_size=10)
    yield pool
    await pool.close()


@pytest.fixture(autouse=True)
async def no_seeded_rows_left(request):
    """Read-model rows seeded by hand (tests/support/query_rows.py) are removed after each test:
    the shared event history must stay replayable."""
    yield
    if query_rows.seeded():
        await query_rows.forget_seeded(request.getfixturevalue("pool"))


@pytest.fixture(autouse=True)
def no_service_process_outlives_its_test():
    yield
    strays = processes.stop_strays()
    assert strays == [], "the test left these service processes running (killed now)"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if (report.skipped and os.environ.get("INTENTLEDGER_REQUIRE_INFRA") == "1"
            and (item.get_closest_marker("infra") or item.get_closest_marker("tooling"))):
        report.outcome = "failed"
        report.longrepr = f"infrastructure test skipped in CI: {report.longrepr}"
