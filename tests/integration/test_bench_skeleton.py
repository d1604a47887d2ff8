"""The skeleton baseline (the pipeline's floor), against real Kafka and PostgreSQL: every
proposal the agent sends crosses the stages and the real relay and arrives once, each process's
CPU is counted, and nothing of the run (schemas, topics, processes) is left behind."""

from __future__ import annotations

import asyncio

import psutil
import pytest
from aiokafka.admin import AIOKafkaAdminClient

from bench.baselines import skeleton, skeleton_stage
from shared.messaging.kafka_security import client_options

pytestmark = pytest.mark.infra


async def test_every_proposal_crosses_the_skeleton_once_and_the_run_leaves_nothing(
        endpoints, pool, infra_settings, monkeypatch):
    if infra_settings is not None:  # the driver's meter finds Kafka's and PostgreSQL's pids
        monkeypatch.setenv("INTENTLEDGER_HOME", str(infra_settings.home))
    before = set(psutil.Process().children(recursive=True))

    figures = await skeleton.run(endpoints, rates="5,8", step_s=2.0, runs=3)

    assert [step["rate_per_s"] for step in figures["steps"]] == [5, 8]
    for step in figures["steps"]:
        assert step["settled"] == step["proposals"] == step["rate_per_s"] * 2
        assert step["repeated"] == 0
        assert step["sustained"]
        assert 0 < step["p50_ms"] <= step["p99_ms"]
        cpu = step["cpu_ms_per_settled"]
        assert {*skeleton_stage.STAGES, "relay", skeleton.AGENT} <= set(cpu)
        if infra_settings is not None:
            assert {"kafka", "postgres"} <= set(cpu)
        assert cpu["all"] == pytest.approx(
            sum(v for name, v in cpu.items() if name not in ("all", "machine", skeleton.AGENT)),
            abs=0.01)
    assert figures["sustained_per_s"] == 8
    assert figures["synchronous_commit"] == "on"

    nonce = figures["nonce"]
    assert not await pool.fetchval(
        "SELECT count(*) FROM pg_namespace WHERE nspname LIKE $1", f"bench_skeleton_{nonce}_%")
    admin = AIOKafkaAdminClient(**client_options(endpoints.kafka_bootstrap))
    await admin.start()
    try:
        left = ["not asked yet"]
        for _ in range(50):  # a deletion leaves the broker's metadata shortly after it returns
            if not (left := [t for t in await admin.list_topics()
                             if t.startswith(f"bench.skeleton-{nonce}")]):
                break
            await asyncio.sleep(0.1)
        assert not left
    finally:
        await admin.close()
    assert set(psutil.Process().children(recursive=True)) <= before  # stages and relay stopped
