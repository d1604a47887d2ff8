"""The projection's health sampler on real Kafka and PostgreSQL: a consumer group's lag is
what its partitions hold beyond its committed offsets, an outbox's backlog is its pending rows,
and replicas sampling the same interval keep one row."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.structs import OffsetAndMetadata

from services.projection.health_sampler import (HealthSampler, bucket_of, sample_consumer_lag,
                                                sample_relay_backlog)
from shared.db.schemas import migrate_service
from shared.db.migrations import migrate, plan_for
from tests.support.kafka import create_topic, unique_topic
from tests.support.query_rows import unique

pytestmark = pytest.mark.infra


async def test_lag_counts_what_a_group_has_not_committed(endpoints):
    topic, group, idle = unique_topic("lag"), unique("group"), unique("never-ran")
    await create_topic(endpoints.kafka_bootstrap, topic, partitions=2)
    producer = AIOKafkaProducer(bootstrap_servers=endpoints.kafka_bootstrap, acks="all")
    await producer.start()
    try:
        for index in range(10):
            await producer.send_and_wait(topic, b"x", partition=index % 2)  # 5 records each
    finally:
        await producer.stop()
    committer = AIOKafkaConsumer(bootstrap_servers=endpoints.kafka_bootstrap, group_id=group,
                                 enable_auto_commit=False)
    await committer.start()
    try:
        committer.assign([TopicPartition(topic, 0), TopicPartition(topic, 1)])
        await committer.commit({TopicPartition(topic, 0): OffsetAndMetadata(5, ""),
                                TopicPartition(topic, 1): OffsetAndMetadata(2, "")})
    finally:
        await committer.stop()
    admin = AIOKafkaAdminClient(bootstrap_servers=endpoints.kafka_bootstrap)
    consumer = AIOKafkaConsumer(bootstrap_servers=endpoints.kafka_bootstrap, enable_auto_commit=False)
    await admin.start()
    await consumer.start()
    try:
        assert await sample_consumer_lag(admin, consumer, [group, idle]) == {group: 3.0}
        assert consumer.paused() == consumer.assignment()  # positions only: never a record
    finally:
        await consumer.stop()
        await admin.close()


async def test_backlog_is_pending_rows_and_one_row_per_interval_across_replicas(pool, endpoints):
    schema = unique("sampled").replace("-", "_")
    await migrate_service(pool, "projection")
    try:
        async with pool.acquire() as conn:
            await migrate(conn, schema, plan_for(None))  # an outbox, as every service has
        for status in ("pending", "pending", "published"):
            await pool.execute(
                f"INSERT INTO {schema}.outbox (event_id, topic, partition_key, headers, envelope, status)"
                " VALUES (gen_random_uuid(), 't', 'k', '{}', '{}', $1)", status)
        async with pool.acquire() as conn:
            sampled = await sample_relay_backlog(conn)
        assert sampled[schema] == 2.0 and sampled["all"] >= 2.0
        assert all(value > 0 for subject, value in sampled.items() if subject != "all")
        every_s, now = 15.0, datetime.now(UTC)  # both replicas sample the same instant
        admin = AIOKafkaAdminClient(bootstrap_servers=endpoints.kafka_bootstrap)
        consumer = AIOKafkaConsumer(bootstrap_servers=endpoints.kafka_bootstrap, enable_auto_commit=False)
        await admin.start()
        await consumer.start()
        try:
            for _replica in range(2):
                await HealthSampler(pool, endpoints.kafka_bootstrap, every_s).sample_once(
                    admin, consumer, now)
        finally:
            await consumer.stop()
            await admin.close()
        rows = await pool.fetch("SELECT bucket, value FROM projection.health_samples "
                                "WHERE metric = 'relay_backlog' AND subject = $1", schema)
        assert [(row["bucket"], row["value"]) for row in rows] == [
            (bucket_of(now, every_s), 2.0)]
    finally:
        await pool.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
        await pool.execute("DELETE FROM projection.health_samples WHERE subject = $1", schema)
