"""Offsets committed together (``shared/messaging/offsets.py``): later than each batch, never
lost. What shows it: the group's committed offsets, and whether a member that takes over a
partition is given applied records again (the inbox's duplicates)."""

import uuid

import pytest
from aiokafka import AIOKafkaProducer

from shared.messaging.envelope import Envelope
from tests.support.consumers import consuming
from tests.support.kafka import committed, create_topic, unique_topic, wait_for
from tests.support.probe import Probe

pytestmark = pytest.mark.infra
PARTITIONS = 2
LONG = 300.0
"""An interval no test waits out: only a rebalance or a stop commits."""


@pytest.fixture
async def probe(pool, endpoints):
    topic = unique_topic()
    await create_topic(endpoints.kafka_bootstrap, topic, partitions=PARTITIONS)
    return await Probe(pool, topic).create()


async def _produce(bootstrap: str, topic: str, items: list[str]) -> None:
    """One record at a time, so that they reach the consumer in several batches."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", enable_idempotence=True)
    await producer.start()
    try:
        for item in items:
            event = Envelope.new(event_type="ProbeSeen", run_id=item, producer="t",
                                 payload={"item": item, "seq": 1})
            await producer.send_and_wait(topic, event.value(), key=item.encode(),
                                         headers=[(k, v.encode()) for k, v in event.headers().items()])
    finally:
        await producer.stop()


def _items(n: int) -> list[str]:
    return [f"item-{uuid.uuid4().hex[:8]}" for _ in range(n)]


async def _applied_is(probe: Probe, n: int) -> bool:
    return await probe.applied_count() == n


async def test_offsets_fall_due_together_within_the_interval(probe, endpoints):
    group = f"g-{uuid.uuid4().hex[:8]}"
    async with consuming(endpoints.kafka_bootstrap, probe.consumer(), probe.topic, group):
        await _produce(endpoints.kafka_bootstrap, probe.topic, _items(10))
        assert await wait_for(lambda: _applied_is(probe, 10), timeout=30)
        assert await wait_for(lambda: _committed_is(endpoints, group, probe.topic, 10), timeout=10)


async def test_a_stop_commits_what_is_staged_and_a_successor_is_given_nothing_again(probe, endpoints):
    group = f"g-{uuid.uuid4().hex[:8]}"
    first = probe.consumer()
    async with consuming(endpoints.kafka_bootstrap, first, probe.topic, group, commit_interval_s=LONG):
        await _produce(endpoints.kafka_bootstrap, probe.topic, _items(10))
        assert await wait_for(lambda: _applied_is(probe, 10), timeout=30)
        assert await committed(endpoints.kafka_bootstrap, group, probe.topic, PARTITIONS) == 0, \
            "offsets of ten batches wait for the interval, not one commit per batch"
    assert await committed(endpoints.kafka_bootstrap, group, probe.topic, PARTITIONS) == 10

    successor = probe.consumer()
    async with consuming(endpoints.kafka_bootstrap, successor, probe.topic, group):
        await _produce(endpoints.kafka_bootstrap, probe.topic, _items(1))
        assert await wait_for(lambda: _applied_is(probe, 11), timeout=30)
    assert (successor.totals.applied, successor.totals.duplicates) == (1, 0)


async def test_a_rebalance_commits_before_partitions_change_hands(probe, endpoints):
    group = f"g-{uuid.uuid4().hex[:8]}"
    first, second = probe.consumer(), probe.consumer()
    bootstrap = endpoints.kafka_bootstrap
    async with consuming(bootstrap, first, probe.topic, group, commit_interval_s=LONG):
        await _produce(bootstrap, probe.topic, _items(10))
        assert await wait_for(lambda: _applied_is(probe, 10), timeout=30)
        async with consuming(bootstrap, second, probe.topic, group, commit_interval_s=LONG):
            assert await wait_for(lambda: _committed_is(endpoints, group, probe.topic, 10),
                                  timeout=30), "the revoked partitions' offsets were committed"
            await _produce(bootstrap, probe.topic, _items(20))  # both members get some
            assert await wait_for(lambda: _applied_is(probe, 30), timeout=60)
    assert first.totals.duplicates + second.totals.duplicates == 0, \
        "neither member was given an applied record again"
    assert second.totals.applied > 0


async def _committed_is(endpoints, group: str, topic: str, n: int) -> bool:
    return await committed(endpoints.kafka_bootstrap, group, topic, PARTITIONS) == n
