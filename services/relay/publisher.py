"""Publishing a claimed batch to Kafka with the durability the outbox promises.

aiokafka defaults to ``acks=1`` without idempotence; both are set explicitly here. With
idempotence the broker drops the producer's own internal retries as duplicates and keeps
per-partition order, so at-least-once duplicates come only from relay restarts.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from aiokafka import AIOKafkaProducer
from intentledger_client.topics import partition_for

from services.relay.records import KafkaRecord
from shared.errors import PRODUCER_SESSION_ERRORS, is_retryable
from shared.messaging.kafka_security import client_options

log = logging.getLogger(__name__)
MAX_BATCH_BYTES = 1_000_000
"""Under the broker's default ``message.max.bytes`` (1 MiB + 12), which bounds a whole batch."""


@dataclass
class BatchOutcome:
    published: list[int] = field(default_factory=list)
    permanent: dict[int, str] = field(default_factory=dict)
    transient: BaseException | None = None
    """The first retryable failure; rows neither published nor permanent stay pending."""


class ProducerHandle:
    """The producer the workers share, replaced when its idempotence session breaks.

    After a broker restart the broker may answer OutOfOrderSequenceNumber: the records are
    fine but this producer can no longer send them. A fresh producer gets a new producer id
    and sequence; the rows are still pending, so nothing is lost.
    """

    def __init__(self, factory: Callable[[], AIOKafkaProducer]) -> None:
        self._factory = factory
        self._lock = asyncio.Lock()
        self.current: AIOKafkaProducer | None = None

    async def start(self) -> None:
        self.current = await self._started()

    async def replace_if_broken(self, producer: AIOKafkaProducer, error: BaseException) -> None:
        if not isinstance(error, PRODUCER_SESSION_ERRORS):
            return
        async with self._lock:
            if producer is not self.current:
                return  # another worker already replaced it
            self.current = await self._started()
            log.warning("replaced the Kafka producer after %s", type(error).__name__)
        try:
            await asyncio.wait_for(producer.stop(), 10)
        except Exception as stop_error:  # noqa: BLE001 - the old producer is abandoned anyway
            log.info("abandoned producer did not stop cleanly: %s", stop_error)

    async def stop(self) -> None:
        if self.current is not None:
            await self.current.stop()

    async def _started(self) -> AIOKafkaProducer:
        producer = self._factory()
        try:
            await producer.start()
        except BaseException:
            await producer.stop()  # releases the client it opened; the caller retries
            raise
        return producer


def new_producer(bootstrap: str, max_message_bytes: int) -> AIOKafkaProducer:
    return AIOKafkaProducer(
        **client_options(bootstrap),
        acks="all",
        enable_idempotence=True,
        linger_ms=5,
        max_batch_size=MAX_BATCH_BYTES,
        max_request_size=MAX_BATCH_BYTES,
        request_timeout_ms=15_000,
        client_id="intentledger-relay",
    )


async def publish(producer: AIOKafkaProducer, records: list[KafkaRecord]) -> BatchOutcome:
    """Send a claimed batch as one producer batch per partition, each in position order.

    Building batches directly (instead of one ``send`` per record) halves the relay's CPU per
    event. Records go to the partition Kafka's default partitioner picks for their key, so
    per-key order holds exactly as with ``send``.
    """
    outcome = BatchOutcome()
    by_partition: dict[tuple[str, int], list[KafkaRecord]] = {}
    partitions_of: dict[str, list[int]] = {}
    try:
        for record in records:
            if record.topic not in partitions_of:
                partitions_of[record.topic] = sorted(await producer.partitions_for(record.topic))
            partition = partition_for(record.key, partitions_of[record.topic])
            by_partition.setdefault((record.topic, partition), []).append(record)
    except Exception as error:  # noqa: BLE001 - classified, nothing swallowed
        _record_failure(outcome, [r.position for r in records], error)
        return outcome
    deliveries = await asyncio.gather(*(
        _send_partition(producer, topic, partition, group, outcome)
        for (topic, partition), group in by_partition.items()))
    for positions, future in (delivery for per_partition in deliveries for delivery in per_partition):
        try:
            await future
            outcome.published.extend(positions)
        except Exception as error:  # noqa: BLE001 - classified, nothing swallowed
            _record_failure(outcome, positions, error)
    return outcome


async def _send(producer: AIOKafkaProducer, batch, topic: str, partition: int) -> asyncio.Future:
    """A batch the relay built is complete: closed, it goes out at once instead of lingering
    ``linger_ms`` for records that only ``send()`` would add (aiokafka sends a closed batch as
    soon as the partition's leader can take it)."""
    batch.close()
    return await producer.send_batch(batch, topic, partition=partition)


async def _send_partition(producer: AIOKafkaProducer, topic: str, partition: int,
                          records: list[KafkaRecord], outcome: BatchOutcome) -> list:
    deliveries: list[tuple[list[int], asyncio.Future]] = []
    batch, positions = producer.create_batch(), []
    for index, record in enumerate(records):
        if batch.append(key=record.key, value=record.value, timestamp=None,
                        headers=record.headers) is None:
            if positions:
                try:
                    deliveries.append((positions, await _send(producer, batch, topic, partition)))
                except Exception as error:  # noqa: BLE001 - classified, nothing swallowed
                    _record_failure(outcome, [r.position for r in records[index - len(positions):]], error)
                    return deliveries
                batch, positions = producer.create_batch(), []
            if batch.append(key=record.key, value=record.value, timestamp=None,
                            headers=record.headers) is None:
                outcome.permanent[record.position] = "record larger than a producer batch"
                continue
        positions.append(record.position)
    if positions:
        try:
            deliveries.append((positions, await _send(producer, batch, topic, partition)))
        except Exception as error:  # noqa: BLE001 - classified, nothing swallowed
            _record_failure(outcome, positions, error)
    return deliveries


def _record_failure(outcome: BatchOutcome, positions: list[int], error: BaseException) -> None:
    if is_retryable(error):
        outcome.transient = outcome.transient or error
    else:
        for position in positions:
            outcome.permanent[position] = f"{type(error).__name__}: {error}"
