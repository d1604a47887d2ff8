"""Creating topics a service depends on, so a fresh cluster works without auto-creation."""

from __future__ import annotations

from collections.abc import Iterable

from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import TopicAlreadyExistsError, for_code

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
        if not missing:
            return []
        try:
            response = await admin.create_topics(missing)
        except TopicAlreadyExistsError:
            return []  # another replica created it first
        # The broker answers per topic; a refusal (no Create ACL, a bad replication factor)
        # must not pass for a creation.
        created = []
        for topic, code, *_ in response.topic_errors:
            if code not in (0, TopicAlreadyExistsError.errno):
                error = for_code(code)
                raise error(f"creating topic {topic}")
            if code == 0:
                created.append(topic)
        return created
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
