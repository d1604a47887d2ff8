"""Creating topics a service depends on, so a fresh cluster works without auto-creation."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable

from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import NotControllerError, TopicAlreadyExistsError, for_code

from shared.messaging.kafka_security import client_options
from shared.topology import RESULTS_PARTITIONS

CONTROLLER_PATIENCE_S = 10.0
"""How long a creation waits for the broker to name a controller (it names none for a moment
after it starts or resumes) before it gives up with a retryable error."""
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
        await controller_known(admin)
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


async def controller_known(admin: AIOKafkaAdminClient,
                           patience_s: float = CONTROLLER_PATIENCE_S) -> None:
    """Wait until the broker's metadata names a controller among its brokers. aiokafka sends a
    creation to the controller its metadata names, and when a broker that has just started or
    resumed names none yet, it fails with an ``AttributeError`` instead of a Kafka error, which
    every caller would take for a bug. Past ``patience_s``: ``NotControllerError``, which is
    retryable (services back off and try again)."""
    deadline = time.monotonic() + patience_s
    while True:
        cluster = await admin.describe_cluster()
        if cluster["controller_id"] in {broker["node_id"] for broker in cluster["brokers"]}:
            return
        if time.monotonic() >= deadline:
            raise NotControllerError(f"the broker named no controller within {patience_s:g} s")
        await asyncio.sleep(0.1)


async def ensure_results_topics(bootstrap: str, names: Iterable[str],
                                replication: int = 1, login: dict[str, str] | None = None
                                ) -> list[str]:
    """Tenants' results topics, all alike: ``RESULTS_PARTITIONS`` partitions, a week's
    retention, and an acknowledged answer on all replicas but one (``acks=all``)."""
    return await ensure_topics(bootstrap, names, RESULTS_PARTITIONS, replication, {
        "retention.ms": str(RESULTS_RETENTION_MS), "cleanup.policy": "delete",
        "min.insync.replicas": str(max(1, replication - 1))}, login)
