"""The relay's SQL guards, checked directly: they are safety nets the happy path never trips."""

import asyncio

import pytest

from services.relay import claims
from tests.support.kafka import create_topic, unique_topic, wait_for
from tests.support.probe import Probe
from tests.support.relay import running_relay

pytestmark = pytest.mark.infra


async def test_a_claims_mark_shows_only_once_committed_and_a_rollback_leaves_rows_pending(pool):
    probe = await Probe(pool, "t.topic").create()
    await probe.emit(["a", "b"], per_key=3)
    async with pool.acquire() as claimer, pool.acquire() as rival:
        with pytest.raises(RuntimeError, match="the publish failed"):
            async with claimer.transaction():
                claimed = await claims.claim_batch(claimer, probe.schema, 10)
                positions = [row["position"] for row in claimed]
                assert len(claimed) == 6 and positions == sorted(positions)
                assert await probe.outbox_status() == {"pending": 6}  # marked, not committed
                async with rival.transaction():  # both shards are held: nothing for a rival
                    assert await claims.claim_batch(rival, probe.schema, 10) == []
                raise RuntimeError("the publish failed")
        assert await probe.outbox_status() == {"pending": 6}
        async with claimer.transaction():
            assert len(await claims.claim_batch(claimer, probe.schema, 10)) == 6
    assert await probe.outbox_status() == {"published": 6}


async def test_a_claim_skips_parked_and_published_rows_and_unclaim_gives_rows_back(pool):
    probe = await Probe(pool, "t.topic").create()
    await probe.emit(["a"], per_key=5)
    p1, p2, p3, p4, p5 = [r["position"] for r in await probe.fetch(
        "SELECT position FROM {s}.outbox ORDER BY position")]
    await probe.fetchval("UPDATE {s}.outbox SET status = 'parked', park_reason = 'by hand' "
                         "WHERE position = $1", p1)
    async with pool.acquire() as conn:
        async with conn.transaction():
            assert [r["position"] for r in await claims.claim_batch(conn, probe.schema, 10)] == [
                p2, p3, p4, p5]
            await claims.unclaim(conn, probe.schema, {p2: "refused by the broker"}, [p3])
        async with conn.transaction():
            assert [r["position"] for r in await claims.claim_batch(conn, probe.schema, 10)] == [p3]
    rows = await probe.fetch(
        "SELECT status, park_reason, published_at IS NOT NULL AS stamped FROM {s}.outbox "
        "ORDER BY position")
    assert [tuple(r) for r in rows] == [
        ("parked", "by hand", False), ("parked", "refused by the broker", False),
        ("published", None, True), ("published", None, True), ("published", None, True)]


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
