"""Bounded inbox and dead letters on real Kafka and PostgreSQL: an inbox row is purged only once
no copy of its record can be delivered again (the broker's own retention of the topic, read from
the broker), so a redelivery after a purge is still applied once; dead letters go after their
age, in bounded batches."""

from __future__ import annotations

import pytest
from aiokafka import AIOKafkaProducer

from shared.messaging.admin import ensure_topics
from shared.messaging.envelope import Envelope
from shared.messaging.retention import RetentionSettings, horizon, purge, topic_retention_s
from tests.support.consumers import consuming
from tests.support.kafka import unique_topic, wait_for
from tests.support.probe import Probe

pytestmark = pytest.mark.infra
HOUR_MS = 3_600_000


async def topic_keeping(bootstrap: str, retention_ms: int) -> str:
    topic = unique_topic("retention")
    await ensure_topics(bootstrap, [topic], 1, configs={"retention.ms": str(retention_ms)})
    return topic


async def send(bootstrap: str, topic: str, envelope: Envelope) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all")
    await producer.start()
    try:
        await producer.send_and_wait(topic, envelope.value(), key=envelope.run_id.encode(),
                                     headers=[(k, v.encode()) for k, v in envelope.headers().items()])
    finally:
        await producer.stop()


async def applied(probe: Probe) -> int:
    return await probe.fetchval("SELECT count(*) FROM {s}.applied")


async def aged(probe: Probe, seconds: float) -> None:
    await probe.pool.execute(f'UPDATE "{probe.schema}".inbox SET processed_at = now() - '
                             "make_interval(secs => $1)", seconds)


async def test_a_purge_never_lets_a_still_deliverable_duplicate_through(pool, endpoints):
    """Configured to keep the inbox one second, the purge keeps it as long as the broker keeps
    the topic (one hour) plus the margin: a record read again from the start of the topic by a
    new consumer group is still recognized. Past that horizon the row goes."""
    bootstrap = endpoints.kafka_bootstrap
    topic = await topic_keeping(bootstrap, HOUR_MS)
    probe = await Probe(pool, topic).create()
    settings = RetentionSettings(inbox_s=1, inbox_margin_s=60)
    limits = horizon(settings, await topic_retention_s(bootstrap, [topic]))
    assert limits.inbox_s == 3600 + 60  # the broker's retention wins over the configured second
    event = Envelope.new(event_type="ProbeSeen", run_id="a", producer="t",
                         payload={"item": "a", "seq": 1})
    await send(bootstrap, topic, event)
    async with consuming(bootstrap, probe.consumer(), topic):
        assert await wait_for(lambda: applied(probe), timeout=30) == 1
    await aged(probe, 600)  # ten minutes: the record is still in the topic
    assert await purge(pool, probe.schema, limits, settings.batch) == (0, 0)
    again = probe.consumer()
    async with consuming(bootstrap, again, topic, group_id="a-new-group"):
        assert await wait_for(lambda: _recognized(again), timeout=30)
    assert (again.totals.duplicates, again.totals.applied) == (1, 0)
    assert await applied(probe) == 1  # read again from the start: recognized, not re-applied
    await aged(probe, 3600 + 61)
    assert await purge(pool, probe.schema, limits, settings.batch) == (1, 0)


async def _recognized(consumer) -> bool:
    return consumer.totals.duplicates > 0


async def test_a_topic_kept_for_ever_keeps_the_inbox_for_ever(pool, endpoints):
    topic = await topic_keeping(endpoints.kafka_bootstrap, -1)
    probe = await Probe(pool, topic).create()
    limits = horizon(RetentionSettings(inbox_s=1),
                     await topic_retention_s(endpoints.kafka_bootstrap, [topic]))
    assert limits.inbox_s is None
    await probe.pool.execute(f'INSERT INTO "{probe.schema}".inbox (consumer, event_id, '
                             "processed_at) VALUES ('probe', gen_random_uuid(), now() - "
                             "interval '400 days')")
    assert await purge(pool, probe.schema, limits, 100) == (0, 0)


async def test_dead_letters_go_after_their_age_in_bounded_batches(pool, endpoints):
    topic = await topic_keeping(endpoints.kafka_bootstrap, HOUR_MS)
    probe = await Probe(pool, topic).create()
    for offset, age_days in enumerate([40, 40, 40, 40, 40, 40, 40, 1]):
        await probe.pool.execute(
            f'INSERT INTO "{probe.schema}".dead_letters (consumer, topic, kafka_partition, '
            "kafka_offset, reason, headers, created_at) VALUES ('probe', $1, 0, $2, 'poison', "
            "'[]'::jsonb, now() - make_interval(days => $3))", topic, offset, age_days)
    limits = horizon(RetentionSettings(dead_letters_s=30 * 86400),
                     await topic_retention_s(endpoints.kafka_bootstrap, [topic]))
    assert await purge(pool, probe.schema, limits, 3) == (0, 7)  # three batches
    assert await probe.fetchval("SELECT count(*) FROM {s}.dead_letters") == 1
