"""Publishing one event from an operator's command (``approve``, ``reject``, ``resolve``).

Services never publish directly: they write outbox rows in the transaction of their state
change. An operator's command has no state of its own to keep consistent with the event, so it
publishes like any outside producer would: acks from all in-sync replicas, idempotent producer,
keyed by the run id (per-run order), the envelope's headers beside its value.
"""

from __future__ import annotations

from aiokafka import AIOKafkaProducer

from shared.messaging.envelope import Envelope
from shared.messaging.kafka_security import client_options


async def publish(bootstrap: str, topic: str, *envelopes: Envelope) -> None:
    producer = AIOKafkaProducer(**client_options(bootstrap), acks="all", enable_idempotence=True)
    await producer.start()
    try:
        for envelope in envelopes:
            await producer.send_and_wait(
                topic, envelope.value(), key=envelope.run_id.encode(),
                headers=[(name, value.encode()) for name, value in envelope.headers().items()])
    finally:
        await producer.stop()
