"""Creating topics a service depends on, so a fresh cluster works without auto-creation."""

from __future__ import annotations

from collections.abc import Iterable

from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import TopicAlreadyExistsError

from shared.messaging.kafka_security import client_options
from shared.topology import RESULTS_PARTITIONS

RESULTS_RETENTION_MS = 7 * 24 * 3600 * 1000
"""Answers are kept a week, as the other request and answer topics (k8s/base/kafka-topics.yaml)."""


async def ensure_topics(bootstrap: str, names: Iterable[str], partitions: int = 8,
                        replication: int = 1, configs: dict[str, str] | None = None,
                        login: dict[str, str] | None = None) -> list[str]:
    """Partitions are keyed by run id; more partitions = more parallel consumers per group.
    Returns the topics this call created (none when they all existed). ``login``: another
    identity's security settings than this process's (the admin of ``infra up --secure``)."""
    admin = AIOKafkaAdminClient(**{**client_options(bootstrap), **(login or {})})
    await admin.start()
    try:
        existing = set(await admin.list_topics())
        missing = [NewTopic(name, partitions, replication, topic_configs=configs or {})
                   for name in dict.fromkeys(names) if name not in existing]
        if missing:
            try:
                await admin.create_topics(missing)
            except TopicAlreadyExistsError:
                pass  # another replica created it first
        return [topic.name for topic in missing]
    finally:
        await admin.close()


async def ensure_results_topics(bootstrap: str, names: Iterable[str],
                                replication: int = 1, login: dict[str, str] | None = None
                                ) -> list[str]:
    """Tenants' results topics, all alike: ``RESULTS_PARTITIONS`` partitions, a week's
    retention, and an acknowledged answer on all replicas but one (``acks=all``)."""
    return await ensure_topics(bootstrap, names, RESULTS_PARTITIONS, replication, {
        "retention.ms": str(RESULTS_RETENTION_MS), "cleanup.policy": "delete",
        "min.insync.replicas": str(max(1, replication - 1))}, login)
