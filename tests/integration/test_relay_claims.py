"""The relay's SQL guards, checked directly: they are safety nets the happy path never trips."""

import asyncio

import pytest

from services.relay import claims
from tests.support.kafka import create_topic, unique_topic, wait_for
from tests.support.probe import Probe
from tests.support.relay import running_relay

pytestmark = pytest.mark.infra


async def test_marking_published_leaves_parked_and_already_published_rows_alone(pool):
    probe = await Probe(pool, "t.topic").create()
    await probe.emit(["a"], per_key=3)
    p1, p2, p3 = [r["position"] for r in await probe.fetch(
        "SELECT position FROM {s}.outbox ORDER BY position")]
    async with pool.acquire() as conn:
        await claims.park(conn, probe.schema, [p1], ["operator parked it"])
        assert len(await claims.mark_published(conn, probe.schema, [p2])) == 1
        assert len(await claims.mark_published(conn, probe.schema, [p1, p2, p3])) == 1
    rows = await probe.fetch("SELECT status, park_reason FROM {s}.outbox ORDER BY position")
    assert [(r["status"], r["park_reason"]) for r in rows] == [
        ("parked", "operator parked it"), ("published", None), ("published", None)]


async def test_a_shard_locked_by_another_relay_is_not_published_while_others_flow(pool, endpoints):
    topic = unique_topic()
    await create_topic(endpoints.kafka_bootstrap, topic)
    probe = await Probe(pool, topic).create()
    keys = await _keys_in_two_shards(probe)
    await probe.emit(keys, per_key=5)
    held_shard = await probe.fetchval("SELECT shard FROM {s}.outbox WHERE partition_key = $1", keys[0])
    async with pool.acquire() as holder, holder.transaction():
        assert await holder.fetchval("SELECT pg_try_advisory_xact_lock(hashtext($1), $2)",
                                     claims.shard_lock(probe.schema), held_shard)
        async with running_relay(endpoints, probe.schema, poll_interval_s=0.2):
            assert await wait_for(lambda: _published_for(probe, keys[1], 5), timeout=15)
            await asyncio.sleep(1.5)
            assert await _published_for(probe, keys[0], 0, exactly=True)
    async with running_relay(endpoints, probe.schema, poll_interval_s=0.2):
        assert await wait_for(lambda: _published_for(probe, keys[0], 5), timeout=15)


async def _keys_in_two_shards(probe: Probe) -> list[str]:
    shards = {}
    for n in range(100):
        key = f"key-{n}"
        shard = await probe.fetchval("SELECT (hashtext($1) & 2147483647) % 32", key)
        shards.setdefault(shard, key)
        if len(shards) == 2:
            return list(shards.values())
    raise AssertionError("no two shards among 100 keys")


async def _published_for(probe: Probe, key: str, n: int, exactly: bool = False) -> bool:
    count = await probe.fetchval(
        "SELECT count(*) FROM {s}.outbox WHERE partition_key = $1 AND status = 'published'", key)
    return count == n if exactly else count >= n
