"""Binding an ``IdempotentConsumer`` to Kafka topics with FastStream, without losing messages.

FastStream's Kafka default (``ACK_FIRST``) auto-commits offsets before the handler runs: a
crash then loses the batch. Here acknowledgement is manual: offsets are committed only after
the batch's database transaction has committed, and any failure rewinds the partitions
(``nack`` seeks back) after a backoff, so the batch is delivered again.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import replace
from typing import Any

from aiokafka import ConsumerRecord
from faststream import AckPolicy
from faststream.kafka import KafkaBroker
from faststream.kafka.message import KafkaMessage
from faststream.kafka.subscriber.usecase import BatchSubscriber

from shared import faults
from shared.errors import is_retryable
from shared.messaging import lag
from shared.messaging.consumer import IdempotentConsumer
from shared.retry import backoff_delay

log = logging.getLogger(__name__)
POLL_TIMEOUT_MS = 5
"""FastStream's batch subscriber waits this long for records and, finding none, sleeps as long
again before it polls anew: a record arriving meanwhile waits up to twice this, at every hop of
the pipeline. Records already fetched return at once; an idle poll costs microseconds."""


def subscribe(broker: KafkaBroker, consumer: IdempotentConsumer, *topics: str,
              group_id: str, max_records: int = 500,
              crash_point: str = "consumer.after_commit_before_ack") -> BatchSubscriber:
    """``crash_point`` names the window between the database commit and the offset commit
    (DESIGN.md §6 calls it ``intake.after_commit`` for the intake). Returns the subscriber, whose
    aiokafka consumer (once started) the health checks ask about its partitions."""
    failures = 0
    subscriber = broker.subscriber(*topics, group_id=group_id, batch=True, max_records=max_records,
                                   batch_timeout_ms=POLL_TIMEOUT_MS, auto_offset_reset="earliest",
                                   ack_policy=AckPolicy.MANUAL, parser=_utf8_safe_parser,
                                   decoder=_the_message_itself, title=f"{consumer.name}:{','.join(topics)}")

    @subscriber
    async def on_batch(message: Any) -> None:  # a KafkaMessage: see _the_message_itself
        nonlocal failures
        records: tuple[ConsumerRecord, ...] = message.raw_message
        try:
            await consumer.process(records)
            await faults.hit(crash_point)
        except Exception as error:
            failures += 1
            level = logging.WARNING if is_retryable(error) else logging.ERROR
            log.log(level, "%s: batch of %d not applied (%s); redelivering",
                    consumer.name, len(records), error, exc_info=not is_retryable(error))
            await asyncio.sleep(backoff_delay(failures))
            await message.nack()
            return
        failures = 0
        await message.ack()
        lag.record(group_id, message.consumer, records)

    return subscriber


async def _utf8_safe_parser(records: tuple[ConsumerRecord, ...], original: Any) -> Any:
    """FastStream decodes headers as UTF-8 before any handler runs; a record with a bad
    header would then fail outside our dead-letter path. Such bytes are replaced instead."""
    return await original(tuple(_with_safe_headers(record) for record in records))


def _with_safe_headers(record: ConsumerRecord) -> ConsumerRecord:
    try:
        for _, value in record.headers:
            value.decode()
        return record
    except UnicodeDecodeError:
        headers = [(name, value.decode(errors="replace").encode()) for name, value in record.headers]
        return replace(record, headers=headers)


async def _the_message_itself(message: KafkaMessage, original: Any) -> KafkaMessage:
    """The handler's body is the message itself: its records (the consumer decodes envelopes
    itself, and dead-letters what it cannot decode), ``ack`` and ``nack``. Asking for it as a
    FastStream ``Context`` parameter instead costs a hop through anyio's thread pool per batch
    (fast_depends resolves context fields with a synchronous call it runs in a worker thread):
    about a tenth of a consuming service's CPU when batches are small."""
    return message
