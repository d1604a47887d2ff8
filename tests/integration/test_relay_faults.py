"""Relay processes crashing and competing, against real Kafka and PostgreSQL."""

import asyncio
import re
from collections import defaultdict

import pytest

from shared.messaging.envelope import Envelope
from tests.support.consumers import consuming
from tests.support.kafka import copies_per_event, create_topic, header, read_topic, unique_topic, wait_for
from tests.support.probe import Probe
from tests.support.processes import ServiceProcess, relay_env

pytestmark = pytest.mark.infra


@pytest.fixture
async def probe(pool, endpoints):
    topic = unique_topic()
    await create_topic(endpoints.kafka_bootstrap, topic, partitions=4)
    return await Probe(pool, topic).create()


async def test_kill_9_after_publish_before_mark_republishes_and_the_consumer_applies_once(
        probe, endpoints, tmp_path):
    [event] = await probe.emit(["run-1"], per_key=1)
    # Park the relay inside the crash window, then kill -9 it there.
    crashing = ServiceProcess("relay", endpoints, tmp_path / "relay-1.log",
                              faults="relay.after_publish_before_mark=delay:600",
                              env=relay_env(probe.schema)).start()
    try:
        first = await read_topic(endpoints.kafka_bootstrap, probe.topic, until=1, timeout=60)
        assert [header(r, "event_id") for r in first] == [str(event.event_id)]
        assert await probe.outbox_status() == {"pending": 1}  # published, not yet marked
    finally:
        assert crashing.kill9() == -9

    restarted = ServiceProcess("relay", endpoints, tmp_path / "relay-2.log",
                               env=relay_env(probe.schema)).start()
    try:
        assert await wait_for(lambda: _status_is(probe, {"published": 1}), timeout=60)
    finally:
        restarted.stop()
    records = await read_topic(endpoints.kafka_bootstrap, probe.topic, until=2, timeout=30)
    assert copies_per_event(records) == {str(event.event_id): 2}

    consumer = probe.consumer()
    async with consuming(endpoints.kafka_bootstrap, consumer, probe.topic):
        assert await wait_for(lambda: _totals(consumer, applied=1, duplicates=1), timeout=60)
    assert await probe.applied_count() == 1


async def test_exit_at_the_crash_point_loses_nothing(probe, endpoints, tmp_path):
    events = await probe.emit([f"run-{i}" for i in range(5)], per_key=20)
    crashing = ServiceProcess("relay", endpoints, tmp_path / "relay-1.log",
                              faults="relay.after_publish_before_mark=exit",
                              env=relay_env(probe.schema, batch_size=10)).start()
    assert crashing.wait_exit(60) == 86  # the injected crash, not an ordinary failure
    assert await probe.outbox_status() == {"pending": 100}
    restarted = ServiceProcess("relay", endpoints, tmp_path / "relay-2.log",
                               env=relay_env(probe.schema)).start()
    try:
        assert await wait_for(lambda: _status_is(probe, {"published": 100}), timeout=60)
    finally:
        restarted.stop()
    records = await read_topic(endpoints.kafka_bootstrap, probe.topic, until=110, timeout=30)
    copies = copies_per_event(records)
    assert set(copies) == {str(e.event_id) for e in events}
    assert sum(copies.values()) > 100  # the crashed batch went out twice


async def test_two_relays_drain_10000_rows_in_per_key_order_each_applied_once(
        probe, endpoints, tmp_path):
    keys = [f"run-{i}" for i in range(40)]
    relays = [ServiceProcess("relay", endpoints, tmp_path / f"relay-{n}.log",
                             env=relay_env(probe.schema, batch_size=20, workers=2)).start()
              for n in (1, 2)]
    try:
        for relay in relays:  # both up before the rows exist: neither may drain them alone
            assert await asyncio.to_thread(relay.wait_for_log, "started with", 60)
        events = await probe.emit(keys, per_key=250, batch=1000)
        assert len(events) == 10_000
        assert await wait_for(lambda: _status_is(probe, {"published": 10_000}), timeout=180)
    finally:
        exits = [relay.stop() for relay in relays]
    assert exits == [0, 0]
    published_by = [_published_count(relay) for relay in relays]
    assert sum(published_by) == 10_000 and min(published_by) > 0, published_by

    records = await read_topic(endpoints.kafka_bootstrap, probe.topic, until=10_000, timeout=60)
    assert set(copies_per_event(records)) == {str(e.event_id) for e in events}
    assert _first_seen_sequence_per_key(records) == {key: list(range(1, 251)) for key in keys}

    consumer = probe.consumer()
    async with consuming(endpoints.kafka_bootstrap, consumer, probe.topic):
        assert await wait_for(lambda: _applied(probe, 10_000), timeout=120)
    assert await probe.fetchval("SELECT count(DISTINCT event_id) FROM {s}.applied") == 10_000
    assert await probe.fetchval("SELECT count(*) FROM {s}.dead_letters") == 0


def _first_seen_sequence_per_key(records) -> dict[str, list[int]]:
    seen: set[str] = set()
    order: dict[str, list[int]] = defaultdict(list)
    for record in sorted(records, key=lambda r: (r.partition, r.offset)):
        envelope = Envelope.model_validate_json(record.value)
        if str(envelope.event_id) not in seen:
            seen.add(str(envelope.event_id))
            order[envelope.run_id].append(envelope.payload["seq"])
    return dict(order)


def _published_count(relay: ServiceProcess) -> int:
    for line in reversed(relay.log_lines()):
        match = re.search(r"after publishing (\d+) events", line.get("msg", ""))
        if match:
            return int(match.group(1))
    raise AssertionError(f"{relay.log_path} has no shutdown summary")


async def _status_is(probe: Probe, expected: dict[str, int]) -> bool:
    return await probe.outbox_status() == expected


async def _applied(probe: Probe, n: int) -> bool:
    return await probe.applied_count() == n


async def _totals(consumer, *, applied: int, duplicates: int) -> bool:
    return (consumer.totals.applied, consumer.totals.duplicates) == (applied, duplicates)
