"""``shared.infra.outages`` against the session's real Kafka and PostgreSQL: each is stopped,
stops answering, is started again on the same endpoint with its data, and answers again.

The session shares this Kafka and this PostgreSQL with every other test, so each test starts
its target again whatever happens, and ends only once it answers.
"""

from __future__ import annotations

import asyncio
import uuid

import pytest
from aiokafka import AIOKafkaProducer

from shared.infra import outages
from shared.infra.readiness import kafka_answers, postgres_answers
from tests.support.kafka import create_topic, read_topic, unique_topic, wait_for

pytestmark = pytest.mark.infra


@pytest.fixture
def local_infra(infra_settings):
    if infra_settings is None:
        pytest.skip("Kafka and PostgreSQL are external (INTENTLEDGER_KAFKA_BOOTSTRAP/_DATABASE_URL)")
    return infra_settings


async def test_postgres_stopped_immediately_comes_back_with_its_commits(local_infra, endpoints, pool):
    table = f"public.outage_{uuid.uuid4().hex[:8]}"
    await pool.execute(f"CREATE TABLE {table} (note text)")
    try:
        await pool.execute(f"INSERT INTO {table} VALUES ('committed before the crash')")
        try:
            await asyncio.to_thread(outages.stop_postgres, local_infra)
            assert not await postgres_answers(endpoints.database_url, timeout=2)
        finally:
            url = await asyncio.to_thread(outages.start_postgres, local_infra)

        assert url == endpoints.database_url
        assert await postgres_answers(url)
        # The session pool's connections died with the server; it opens new ones by itself.
        assert await wait_for(lambda: _notes(pool, table), timeout=30) == ["committed before the crash"]
    finally:
        await pool.execute(f"DROP TABLE IF EXISTS {table}")


async def test_kafka_stopped_comes_back_on_its_endpoint_with_its_records(local_infra, endpoints):
    topic = unique_topic("outage")
    await create_topic(endpoints.kafka_bootstrap, topic, partitions=1)
    await _produce(endpoints.kafka_bootstrap, topic, b"before the outage")
    try:
        await asyncio.to_thread(outages.stop_kafka, local_infra)
        assert not await kafka_answers(endpoints.kafka_bootstrap, timeout=2)
    finally:
        bootstrap = await asyncio.to_thread(outages.start_kafka, local_infra)

    assert bootstrap == endpoints.kafka_bootstrap
    assert await kafka_answers(bootstrap)
    records = await read_topic(bootstrap, topic, until=1, timeout=30)
    assert [record.value for record in records] == [b"before the outage"]


async def _notes(pool, table: str) -> list[str] | None:
    try:
        return [row["note"] for row in await pool.fetch(f"SELECT note FROM {table}")]
    except Exception:  # noqa: BLE001 - a connection the restart closed: try again
        return None


async def _produce(bootstrap: str, topic: str, value: bytes) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", enable_idempotence=True)
    await producer.start()
    try:
        await producer.send_and_wait(topic, value, key=b"k")
    finally:
        await producer.stop()
