"""A tenant's agents are held to their Kafka quota by the authorizing broker itself
(``infra up --secure`` sets ``shared.kafka_users.quotas``, as Strimzi does from the
``KafkaUser``'s ``spec.quotas``): an agent that floods proposals is slowed to its byte rate
before any of it reaches the intake, while a user without a quota sends the same bytes at
the machine's speed."""

from __future__ import annotations

import time

import pytest
from aiokafka import TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, RecordsToDelete

from shared import topology
from shared.infra.kafka_credentials import ADMIN
from shared.kafka_users import AGENT_QUOTA, agent_user

pytestmark = pytest.mark.infra
ACME = agent_user("acme")
RECORD = 128 * 1024
FLOOD = 16 * 1024 * 1024
"""More than the ten seconds of burst the broker's rate windows allow (``quota.window.num``
11 windows of 1 s: a rate is measured over at least ten of them), so the quota must bite."""


def test_the_broker_holds_every_agents_quota(secure_kafka):
    held = secure_kafka.tools().quotas()
    assert held == {user: quota.configs() for user, quota in secure_kafka.plan.quotas.items()}
    assert set(held) == {agent_user(tenant) for tenant in ("acme", "globex")}


async def _flood(secure_kafka, user: str) -> float:
    """Seconds to send ``FLOOD`` bytes of proposals as ``user``, to one partition."""
    async with secure_kafka.producer(user, max_request_size=2 * RECORD, linger_ms=5) as producer:
        started = time.monotonic()
        sent = [await producer.send(topology.AGENT_PROPOSALS, b"q" * RECORD, partition=0)
                for _ in range(FLOOD // RECORD)]
        for future in sent:
            await future
        return time.monotonic() - started


async def test_an_agent_flooding_proposals_is_slowed_to_its_byte_rate(secure_kafka):
    unlimited = await _flood(secure_kafka, ADMIN)
    limited = await _flood(secure_kafka, ACME)
    try:
        # At 1 MiB/s, 16 MiB past a 10 s burst allowance takes about 6 s more; unthrottled,
        # loopback takes well under one.
        floor = (FLOOD / AGENT_QUOTA.producer_byte_rate - 10) / 2
        assert limited >= floor, (limited, unlimited)
        assert limited >= 3 * unlimited, (limited, unlimited)
    finally:
        await _forget_the_flood(secure_kafka)


async def _forget_the_flood(secure_kafka) -> None:
    """No consumer that starts later (an intake) has to wade through the probe's bytes."""
    admin = AIOKafkaAdminClient(**secure_kafka.login(ADMIN))
    await admin.start()
    try:  # -1: up to the partition's high watermark
        await admin.delete_records({TopicPartition(topology.AGENT_PROPOSALS, 0):
                                    RecordsToDelete(-1)})
    finally:
        await admin.close()
