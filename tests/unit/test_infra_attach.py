"""``infra.attach``: pointed at both services it starts nothing; pointed at fewer, it starts
what ``up`` would (the benchmarks and ``chaos run`` attach through it)."""

from __future__ import annotations

import pytest

from shared.config import Endpoints, Settings
from shared.infra import manager

KAFKA = "127.0.0.1:19092"
DATABASE = "postgresql://postgres@127.0.0.1:15432/intentledger"


@pytest.fixture
def started(monkeypatch) -> list[Settings]:
    """Every call to ``up``, which here starts nothing and answers its own endpoints."""
    calls: list[Settings] = []

    def up(settings: Settings) -> Endpoints:
        calls.append(settings)
        return Endpoints(kafka_bootstrap="127.0.0.1:1", database_url="postgresql://up")

    monkeypatch.setattr(manager, "up", up)
    return calls


def test_both_named_are_attached_to_and_nothing_is_started(tmp_path, started):
    settings = Settings(home=tmp_path, kafka_bootstrap=KAFKA, database_url=DATABASE)
    endpoints = manager.attach(settings)
    assert (endpoints.kafka_bootstrap, endpoints.database_url) == (KAFKA, DATABASE)
    assert started == []


@pytest.mark.parametrize("named", [{"kafka_bootstrap": KAFKA, "database_url": None},
                                   {"kafka_bootstrap": None, "database_url": DATABASE},
                                   {"kafka_bootstrap": None, "database_url": None}],
                         ids=["only kafka", "only postgres", "neither"])
def test_fewer_named_start_through_up(tmp_path, started, named):
    settings = Settings(home=tmp_path, **named)
    endpoints = manager.attach(settings)
    assert started == [settings]
    assert endpoints.database_url == "postgresql://up"
