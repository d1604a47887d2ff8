"""The hop-floor baseline, against real Kafka and PostgreSQL: its figures are timings of what it
says (a transaction and a wake-up take longer than one warm round trip), its floor is the sum
it documents, and it leaves no scratch schema behind."""

import pytest

from bench.baselines import hop_floor

pytestmark = pytest.mark.infra


async def test_the_floor_is_the_sum_of_handoffs_each_timed(endpoints, pool):
    figures = await hop_floor.run(endpoints, samples=5, idle_s=0.02)

    warm_ms = figures["round_trip_warm_us"] / 1000
    assert 0 < warm_ms < figures["write_to_wake_ms"]  # three round trips, a flush, a NOTIFY
    assert 0 < figures["round_trip_after_idle_us"]
    assert warm_ms < figures["produce_to_fetch_ms"]  # a produce, then a fetch answered
    assert figures["hop_floor_ms"] == pytest.approx(
        figures["write_to_wake_ms"] + figures["produce_to_fetch_ms"]
        + (figures["round_trip_after_idle_us"] + figures["round_trip_warm_us"]) / 1000)
    assert figures["synchronous_commit"] == "on"
    assert not await pool.fetchval(
        "SELECT count(*) FROM pg_namespace WHERE nspname LIKE 'bench_hop_floor_%'")
