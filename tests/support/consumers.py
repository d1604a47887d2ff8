"""Running an IdempotentConsumer on real Kafka through FastStream, as the services do."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from faststream.kafka import KafkaBroker

from shared.messaging.consumer import IdempotentConsumer
from shared.messaging.offsets import COMMIT_INTERVAL_S
from shared.messaging.subscription import subscribe


@asynccontextmanager
async def consuming(bootstrap: str, consumer: IdempotentConsumer, topic: str,
                    group_id: str | None = None,
                    commit_interval_s: float = COMMIT_INTERVAL_S) -> AsyncIterator[KafkaBroker]:
    broker = KafkaBroker(bootstrap, logger=None)
    subscribe(broker, consumer, topic, group_id=group_id or f"g-{uuid.uuid4().hex[:8]}",
              commit_interval_s=commit_interval_s)
    await broker.start()
    try:
        yield broker
    finally:
        await broker.stop()
