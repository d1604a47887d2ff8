"""Creating topics a service depends on, so a fresh cluster works without auto-creation."""

from __future__ import annotations

from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import TopicAlreadyExistsError

from shared.messaging.kafka_security import client_options


async def ensure_topics(bootstrap: str, names: list[str], partitions: int = 8,
                        replication: int = 1) -> None:
    """Partitions are keyed by run id; more partitions = more parallel consumers per group."""
    admin = AIOKafkaAdminClient(**client_options(bootstrap))
    await admin.start()
    try:
        existing = set(await admin.list_topics())
        missing = [NewTopic(name, partitions, replication) for name in names if name not in existing]
        if missing:
            try:
                await admin.create_topics(missing)
            except TopicAlreadyExistsError:
                pass  # another replica created it first
    finally:
        await admin.close()
