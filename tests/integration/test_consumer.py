"""The idempotent-consumer template on real Kafka: redelivery, poison records, retries."""

import pytest
from aiokafka import AIOKafkaProducer

from shared import faults
from shared.errors import RetryableError
from shared.messaging.consumer import IdempotentConsumer
from shared.messaging.envelope import Envelope
from tests.support.consumers import consuming
from tests.support.kafka import create_topic, unique_topic, wait_for
from tests.support.probe import Probe

pytestmark = pytest.mark.infra


async def _produce(bootstrap: str, topic: str, records: list[tuple[bytes, bytes, list]]) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", enable_idempotence=True)
    await producer.start()
    try:
        for key, value, headers in records:
            await producer.send_and_wait(topic, value, key=key, headers=headers)
    finally:
        await producer.stop()


def _record(envelope: Envelope) -> tuple[bytes, bytes, list]:
    return (envelope.run_id.encode(), envelope.value(),
            [(k, v.encode()) for k, v in envelope.headers().items()])


def _seen(item: str, seq: int) -> Envelope:
    return Envelope.new(event_type="ProbeSeen", run_id=item, producer="t",
                        payload={"item": item, "seq": seq})


@pytest.fixture
async def probe(pool, endpoints):
    topic = unique_topic()
    await create_topic(endpoints.kafka_bootstrap, topic, partitions=2)
    return await Probe(pool, topic).create()


async def test_an_event_delivered_twice_in_one_batch_is_applied_once(probe, endpoints):
    event = _seen("a", 1)
    await _produce(endpoints.kafka_bootstrap, probe.topic, [_record(event), _record(event),
                                                            _record(_seen("a", 2))])
    async with consuming(endpoints.kafka_bootstrap, probe.consumer(), probe.topic):
        assert await wait_for(lambda: _applied_is(probe, 2), timeout=30)
    assert await probe.fetchval("SELECT count(*) FROM {s}.applied WHERE event_id = $1",
                                event.event_id) == 1
    assert await probe.fetchval("SELECT version FROM {s}.items WHERE id = 'a'") == 2
    assert await probe.fetchval("SELECT count(*) FROM {s}.dead_letters") == 0


async def test_a_copy_arriving_in_a_later_batch_is_recognised_by_the_inbox(probe, endpoints):
    event = _seen("a", 1)
    consumer = probe.consumer()
    async with consuming(endpoints.kafka_bootstrap, consumer, probe.topic):
        await _produce(endpoints.kafka_bootstrap, probe.topic, [_record(event)])
        assert await wait_for(lambda: _applied_is(probe, 1), timeout=30)
        await _produce(endpoints.kafka_bootstrap, probe.topic, [_record(event), _record(_seen("a", 2))])
        assert await wait_for(lambda: _applied_is(probe, 2), timeout=30)
    assert consumer.totals.duplicates == 1
    assert await probe.fetchval("SELECT count(*) FROM {s}.applied WHERE event_id = $1",
                                event.event_id) == 1


async def test_poison_records_are_dead_lettered_with_a_reason_and_the_rest_applied(probe, endpoints):
    good = [_seen("a", 1), _seen("a", 2)]
    out_of_order = _seen("b", 5)  # version 5 onto nothing: the legality gate refuses it
    bad_header = list(_record(_seen("c", 1)))
    bad_header[2] = bad_header[2] + [("x-junk", b"\xff\xfe")]
    await _produce(endpoints.kafka_bootstrap, probe.topic, [
        (b"a", b"not json at all", []),
        _record(good[0]),
        _record(out_of_order),
        tuple(bad_header),
        (b"a", b'{"event_id": "nope"}', []),
        _record(good[1]),
        _record(_seen("a", 4)),  # a gap: version 3 never came
    ])
    async with consuming(endpoints.kafka_bootstrap, probe.consumer(), probe.topic):
        assert await wait_for(lambda: _applied_is(probe, 3), timeout=30)
        assert await wait_for(lambda: _dead_letters_are(probe, 4), timeout=10)
    reasons = sorted(r["reason"] for r in await probe.fetch("SELECT reason FROM {s}.dead_letters"))
    assert any("not an event envelope" in r for r in reasons)
    assert any("b seq 5: illegal" in r for r in reasons)
    assert any("a seq 4: illegal" in r for r in reasons)
    assert await probe.fetchval(
        "SELECT array_agg(seq ORDER BY n) FROM {s}.applied WHERE item = 'a'") == [1, 2]
    # the out-of-order event is not re-applied on redelivery: its id is in the inbox
    assert await probe.fetchval("SELECT count(*) FROM {s}.inbox WHERE event_id = $1",
                                out_of_order.event_id) == 1


def _set_wise(probe: Probe, calls: list[list]) -> IdempotentConsumer:
    """A set-wise consumer over the probe's per-event logic, remembering each call's events."""

    async def apply_all(uow, envelopes):
        calls.append([envelope.event_id for envelope in envelopes])
        for envelope in envelopes:
            await probe.apply(uow, envelope)

    return IdempotentConsumer("probe", probe.schema, probe.pool, apply_all, set_wise=True)


async def test_a_set_wise_handler_gets_the_fresh_events_of_a_batch_in_one_call(probe, endpoints):
    a1, b1, a2 = _seen("a", 1), _seen("b", 1), _seen("a", 2)
    await _produce(endpoints.kafka_bootstrap, probe.topic,
                   [_record(a1), _record(a1), _record(b1), _record(a2)])
    calls: list[list] = []
    async with consuming(endpoints.kafka_bootstrap, _set_wise(probe, calls), probe.topic):
        assert await wait_for(lambda: _applied_is(probe, 3), timeout=30)
    delivered = [event_id for call in calls for event_id in call]
    assert sorted(delivered) == sorted([a1.event_id, b1.event_id, a2.event_id])  # the copy: none
    assert delivered.index(a1.event_id) < delivered.index(a2.event_id)
    assert max(len(call) for call in calls) > 1
    assert await probe.fetchval("SELECT count(*) FROM {s}.dead_letters") == 0


async def test_a_set_wise_batch_that_fails_is_applied_event_by_event_around_the_bad_one(
        probe, endpoints):
    skipping = _seen("b", 9)  # b is at version 0: a permanent refusal
    await _produce(endpoints.kafka_bootstrap, probe.topic,
                   [_record(_seen("a", 1)), _record(skipping), _record(_seen("a", 2))])
    calls: list[list] = []
    async with consuming(endpoints.kafka_bootstrap, _set_wise(probe, calls), probe.topic):
        assert await wait_for(lambda: _dead_letters_are(probe, 1), timeout=30)
        assert await wait_for(lambda: _applied_is(probe, 2), timeout=10)
    assert [row["event_id"] for row in await probe.fetch("SELECT event_id FROM {s}.dead_letters")
            ] == [skipping.event_id]
    assert [skipping.event_id] in calls  # isolated: alone in its call


def _own_inbox(probe: Probe) -> IdempotentConsumer:
    """A set-wise consumer whose handler is its own inbox, as the projection's history is: its
    first write is keyed by event id and says which events were new."""

    async def apply_new(uow, envelopes):
        fresh = {row["event_id"] for row in await uow.connection.fetch(
            f'INSERT INTO "{probe.schema}".seen (event_id) SELECT unnest($1::uuid[])'
            " ON CONFLICT DO NOTHING RETURNING event_id",
            [envelope.event_id for envelope in envelopes])}
        for envelope in envelopes:
            if envelope.event_id in fresh:
                await probe.apply(uow, envelope)
        return fresh

    return IdempotentConsumer("probe", probe.schema, probe.pool, apply_new, set_wise=True,
                              inbox=False)


async def test_a_handler_that_is_its_own_inbox_applies_every_copy_once_and_counts_the_rest(
        probe, endpoints):
    await probe.fetchval("CREATE TABLE {s}.seen (event_id uuid PRIMARY KEY)")
    a1, a2, poison = _seen("a", 1), _seen("a", 2), _seen("b", 7)
    consumer = _own_inbox(probe)
    async with consuming(endpoints.kafka_bootstrap, consumer, probe.topic):
        await _produce(endpoints.kafka_bootstrap, probe.topic, [_record(a1), _record(a1)])
        assert await wait_for(lambda: _applied_is(probe, 1), timeout=30)
        # a copy in a later batch, a new event, and one the handler refuses
        await _produce(endpoints.kafka_bootstrap, probe.topic,
                       [_record(a1), _record(poison), _record(a2)])
        assert await wait_for(lambda: _applied_is(probe, 2), timeout=30)
        assert await wait_for(lambda: _dead_letters_are(probe, 1), timeout=10)
    assert await probe.fetchval(
        "SELECT array_agg(seq ORDER BY n) FROM {s}.applied WHERE item = 'a'") == [1, 2]
    assert (consumer.totals.applied, consumer.totals.duplicates) == (2, 2)
    assert await probe.fetchval("SELECT count(*) FROM {s}.inbox") == 0  # no second write


def test_only_a_set_wise_handler_can_be_its_own_inbox(probe):
    with pytest.raises(ValueError, match="set-wise"):
        IdempotentConsumer("probe", probe.schema, probe.pool, probe.apply, inbox=False)


async def test_a_retryable_failure_redelivers_the_batch_and_applies_it_once(probe, endpoints):
    calls = 0

    async def flaky(uow, envelope):
        nonlocal calls
        calls += 1
        if calls <= 2:
            raise RetryableError("database briefly unavailable")
        await probe.apply(uow, envelope)

    consumer = IdempotentConsumer("probe", probe.schema, probe.pool, flaky)
    await _produce(endpoints.kafka_bootstrap, probe.topic, [_record(_seen("a", 1))])
    async with consuming(endpoints.kafka_bootstrap, consumer, probe.topic):
        assert await wait_for(lambda: _applied_is(probe, 1), timeout=30)
    assert calls == 3
    assert await probe.applied_count() == 1


async def test_crash_after_commit_before_offset_commit_redelivers_without_reapplying(probe, endpoints):
    await _produce(endpoints.kafka_bootstrap, probe.topic, [_record(_seen("a", 1))])
    consumer = probe.consumer()
    faults.configure("consumer.after_commit_before_ack=drop@1")
    try:
        async with consuming(endpoints.kafka_bootstrap, consumer, probe.topic):
            assert await wait_for(lambda: _redelivered(consumer), timeout=30)
    finally:
        faults.configure("")
    assert (consumer.totals.applied, consumer.totals.duplicates) == (1, 1)
    assert await probe.applied_count() == 1
    assert await probe.fetchval("SELECT count(*) FROM {s}.dead_letters") == 0


async def _applied_is(probe: Probe, n: int) -> bool:
    return await probe.applied_count() == n


async def _dead_letters_are(probe: Probe, n: int) -> bool:
    return await probe.fetchval("SELECT count(*) FROM {s}.dead_letters") == n


async def _redelivered(consumer) -> bool:
    return consumer.totals.duplicates >= 1
