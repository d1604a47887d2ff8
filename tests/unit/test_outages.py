"""Outages are caused only to what ``infra up`` runs as local processes: anything else is
refused with a message before any process is touched."""

from __future__ import annotations

import pytest

from shared.config import Settings
from shared.infra import outages
from shared.infra.errors import InfraError
from shared.infra.state import InfraState, ServiceState

LOCAL = InfraState(
    kafka=ServiceState(mode="local", pid=None, ports={"kafka": 1, "controller": 2},
                       endpoint="127.0.0.1:1"),
    postgres=ServiceState(mode="local", pid=None, ports={"postgres": 3},
                          endpoint="postgresql://postgres@127.0.0.1:3/intentledger"))

EVERY_OUTAGE = [outages.stop_kafka, outages.start_kafka, outages.pause_kafka, outages.resume_kafka,
                outages.stop_postgres, outages.start_postgres]


def settings_for(tmp_path, state: InfraState | None, **overrides) -> Settings:
    settings = Settings(**({"home": tmp_path, "kafka_bootstrap": None, "database_url": None} | overrides))
    if state is not None:
        state.save(settings.infra_state_file)
    return settings


@pytest.mark.parametrize("outage", EVERY_OUTAGE, ids=lambda f: f.__name__)
def test_nothing_started_under_this_home_is_refused(tmp_path, outage):
    with pytest.raises(InfraError, match="never started under"):
        outage(settings_for(tmp_path, None))


@pytest.mark.parametrize("outage", EVERY_OUTAGE, ids=lambda f: f.__name__)
def test_a_docker_service_is_refused(tmp_path, outage):
    state = LOCAL.model_copy(deep=True)
    state.kafka = ServiceState(mode="docker", container_id="c1", endpoint="127.0.0.1:9")
    state.postgres = ServiceState(mode="docker", container_id="c2", endpoint="postgresql://x")
    with pytest.raises(InfraError, match="runs in Docker"):
        outage(settings_for(tmp_path, state))


@pytest.mark.parametrize("outage", EVERY_OUTAGE, ids=lambda f: f.__name__)
def test_an_external_service_is_refused(tmp_path, outage):
    state = LOCAL.model_copy(deep=True)
    state.kafka = ServiceState(mode="external", endpoint="kafka.example:9092")
    state.postgres = ServiceState(mode="external", endpoint="postgresql://db.example/x")
    with pytest.raises(InfraError, match="is external"):
        outage(settings_for(tmp_path, state))


@pytest.mark.parametrize("outage", EVERY_OUTAGE, ids=lambda f: f.__name__)
def test_an_endpoint_named_by_the_environment_is_not_ours_to_stop(tmp_path, outage):
    """The local processes run, but this process was pointed elsewhere: stopping ours would
    not be the outage the caller asked for."""
    settings = settings_for(tmp_path, LOCAL, kafka_bootstrap="kafka.example:9092",
                            database_url="postgresql://db.example/x")
    with pytest.raises(InfraError, match=r"is external \(INTENTLEDGER_"):
        outage(settings)
