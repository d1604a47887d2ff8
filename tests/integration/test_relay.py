"""The relay against real Kafka and PostgreSQL: delivery, parking, reconnects."""

import json
import uuid

import pytest
from aiokafka import errors as kafka_errors

from services.relay.publisher import ProducerHandle, new_producer
from services.relay.relay import Relay
from services.relay.settings import RelaySettings
from shared.messaging.envelope import Envelope
from tests.support.kafka import copies_per_event, create_topic, header, read_topic, unique_topic, wait_for
from tests.support.probe import Probe
from tests.support.relay import running_relay

pytestmark = pytest.mark.infra


async def test_published_records_carry_the_envelope_in_headers_and_value(pool, endpoints):
    topic = unique_topic()
    await create_topic(endpoints.kafka_bootstrap, topic)
    probe = await Probe(pool, topic).create()
    [event] = await probe.emit(["run-a"], per_key=1)
    async with running_relay(endpoints, probe.schema):
        [record] = await read_topic(endpoints.kafka_bootstrap, topic, until=1, timeout=30)
        assert await wait_for(lambda: _status_is(probe, {"published": 1}), timeout=10)
    assert record.key == b"run-a"
    assert Envelope.model_validate(json.loads(record.value)) == event
    assert header(record, "event_id") == str(event.event_id)
    assert header(record, "event_type") == "ProbeSeen"
    assert header(record, "run_id") == "run-a"


async def test_malformed_rows_are_parked_with_a_reason_and_the_rest_flow(pool, endpoints):
    topic = unique_topic()
    await create_topic(endpoints.kafka_bootstrap, topic)
    probe = await Probe(pool, topic).create()
    good_before = await probe.emit(["k1", "k2"], per_key=3)
    mismatched = Envelope.new(event_type="ProbeSeen", run_id="k3", producer="t", payload={})
    await probe.insert_raw_outbox(event_id=uuid.uuid4(), topic=topic, key="k3",
                                  envelope=mismatched.model_dump_json())
    await probe.insert_raw_outbox(event_id=uuid.uuid4(), topic="bad topic!", key="k4",
                                  envelope="{}")
    huge = Envelope.new(event_type="ProbeSeen", run_id="k5", producer="t",
                        payload={"blob": "x" * 50_000})
    await probe.insert_raw_outbox(event_id=huge.event_id, topic=topic, key="k5",
                                  envelope=huge.model_dump_json(), headers=huge.headers())
    good_after = await probe.emit(["k1", "k2"], per_key=2)

    async with running_relay(endpoints, probe.schema, max_message_bytes=20_000):
        records = await read_topic(endpoints.kafka_bootstrap, topic, until=10, timeout=30)
        assert await wait_for(lambda: _status_is(probe, {"published": 10, "parked": 3}), timeout=10)

    published_ids = set(copies_per_event(records))
    assert published_ids == {str(e.event_id) for e in good_before + good_after}
    reasons = [r["park_reason"] for r in await probe.fetch(
        "SELECT park_reason FROM {s}.outbox WHERE status = 'parked' ORDER BY position")]
    assert "event_id, run_id and event_type match" in reasons[0]
    assert "invalid topic" in reasons[1]
    assert reasons[2].startswith("oversized")


async def test_relay_reconnects_and_listens_again_after_its_connections_are_terminated(pool, endpoints):
    topic = unique_topic()
    await create_topic(endpoints.kafka_bootstrap, topic)
    probe = await Probe(pool, topic).create()
    # A long polling interval: only a working LISTEN can deliver quickly.
    async with running_relay(endpoints, probe.schema, poll_interval_s=300) as metrics:
        await probe.emit(["k"], per_key=1)
        assert await wait_for(lambda: _status_is(probe, {"published": 1}), timeout=15)
        killed = await probe.fetchval(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE application_name = 'intentledger-relay'")
        assert killed >= 1
        await probe.emit(["k"], per_key=1)  # the new event id differs; seq restarts at 1
        assert await wait_for(lambda: _status_is(probe, {"published": 2}), timeout=15)
        # The reconnect itself triggers one rescan; only a renewed LISTEN catches the next one.
        await probe.emit(["k"], per_key=1)
        assert await wait_for(lambda: _status_is(probe, {"published": 3}), timeout=5)
        assert metrics.published == 3


class _RefusingTopics:
    """A real producer, except that sends to the given topics fail with the given errors."""

    def __init__(self, producer, refusals: dict[str, Exception]) -> None:
        self._producer, self._refusals = producer, refusals

    def __getattr__(self, name):
        return getattr(self._producer, name)

    async def send_batch(self, batch, topic, *, partition):
        if topic in self._refusals:
            raise self._refusals[topic]
        return await self._producer.send_batch(batch, topic, partition=partition)


async def test_a_batch_the_broker_took_in_part_commits_what_went_out_and_nothing_else(
        pool, endpoints):
    taken, down, refused = unique_topic(), unique_topic(), unique_topic()
    for topic in (taken, down, refused):
        await create_topic(endpoints.kafka_bootstrap, topic)
    probe = await Probe(pool, taken).create()
    sent = await probe.emit(["k1", "k2"], per_key=2)
    for topic, key in ((down, "k3"), (refused, "k4")):
        envelope = Envelope.new(event_type="ProbeSeen", run_id=key, producer="t", payload={})
        await probe.insert_raw_outbox(event_id=envelope.event_id, topic=topic, key=key,
                                      envelope=envelope.model_dump_json(),
                                      headers=envelope.headers())
    settings = RelaySettings(schemas=[probe.schema])
    producers = ProducerHandle(
        lambda: new_producer(endpoints.kafka_bootstrap, settings.max_message_bytes))
    await producers.start()
    real = producers.current
    producers.current = _RefusingTopics(real, {
        down: kafka_errors.KafkaConnectionError("broker went away"),
        refused: kafka_errors.RecordTooLargeError("too large for this topic")})
    relay = Relay(pool, producers, settings)
    try:
        with pytest.raises(kafka_errors.KafkaConnectionError):
            await relay.relay_batch(probe.schema)
        assert await probe.outbox_status() == {"published": 4, "pending": 1, "parked": 1}
        reason = await probe.fetchval("SELECT park_reason FROM {s}.outbox WHERE status = 'parked'")
        assert reason.startswith("RecordTooLargeError") and "too large for this topic" in reason
        assert relay.metrics.published == 4 and relay.metrics.parked == 1
        producers.current = real  # the broker is back: the pending row goes, nothing else again
        assert await relay.relay_batch(probe.schema) == 1
    finally:
        await real.stop()
    assert await probe.outbox_status() == {"published": 5, "parked": 1}
    records = await read_topic(endpoints.kafka_bootstrap, taken, until=4, timeout=30)
    assert copies_per_event(records) == {str(e.event_id): 1 for e in sent}
    [late] = await read_topic(endpoints.kafka_bootstrap, down, until=1, timeout=30)
    assert header(late, "run_id") == "k3"


async def _status_is(probe: Probe, expected: dict[str, int]) -> bool:
    return await probe.outbox_status() == expected


async def test_retention_deletes_only_published_rows_older_than_the_window(pool, endpoints):
    topic = unique_topic()
    await create_topic(endpoints.kafka_bootstrap, topic)
    probe = await Probe(pool, topic).create()
    await probe.emit(["old", "recent"], per_key=2)
    async with running_relay(endpoints, probe.schema):
        assert await wait_for(lambda: _status_is(probe, {"published": 4}), timeout=15)
    await probe.insert_raw_outbox(event_id=uuid.uuid4(), topic="bad topic!", key="k", envelope="{}")
    async with running_relay(endpoints, probe.schema):
        assert await wait_for(lambda: _status_is(probe, {"published": 4, "parked": 1}), timeout=15)
    await probe.fetchval("UPDATE {s}.outbox SET published_at = now() - interval '5 days', "
                         "created_at = now() - interval '5 days' "
                         "WHERE partition_key = 'old' OR status = 'parked'")
    await probe.emit(["pending-one"], per_key=1)

    relay = Relay(pool, ProducerHandle(lambda: None), RelaySettings(schemas=[probe.schema],
                                                                    retention_hours=72))
    assert await relay.purge_published() == 2
    assert await probe.outbox_status() == {"published": 2, "parked": 1, "pending": 1}
