"""Binding an ``IdempotentConsumer`` to Kafka topics with FastStream, without losing messages.

FastStream's Kafka default (``ACK_FIRST``) auto-commits offsets before the handler runs: a
crash then loses the batch. Here acknowledgement is manual: offsets are staged only after the
batch's database transaction has committed, and committed together a little later
(``offsets.CoalescedCommits``); any failure rewinds the partitions (``nack`` seeks back) after a
backoff, so the batch is delivered again.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from itertools import chain
from typing import Any

from aiokafka import AIOKafkaConsumer, ConsumerRecord
from faststream import AckPolicy
from faststream.kafka import KafkaBroker
from faststream.kafka.message import KafkaMessage
from faststream.kafka.subscriber.usecase import BatchSubscriber

from shared import faults
from shared.errors import is_retryable
from shared.messaging import lag
from shared.messaging.consumer import IdempotentConsumer
from shared.messaging.offsets import COMMIT_INTERVAL_S, CoalescedCommits
from shared.retry import backoff_delay

log = logging.getLogger(__name__)
IDLE_WAIT_MS = 200
"""How long one poll waits for records. Records return the moment the fetcher has them, so this
bounds only how often an idle consumer wakes up (see ``_waiting_for_records``)."""


@dataclass(frozen=True)
class Gathering:
    """How long Kafka may hold a fetch (``fetch.max.wait.ms``) until it has ``min_bytes`` of
    records for it (``fetch.min.bytes``). The default answers the moment one record is there:
    the agent's path. A consumer off that path, such as a read model, gathers bigger batches
    instead, each paying one transaction, one fetch and one offset commit for more records."""
    max_wait_ms: int = 500
    min_bytes: int = 1


def subscribe(broker: KafkaBroker, consumer: IdempotentConsumer, *topics: str,
              group_id: str, max_records: int = 500,
              crash_point: str = "consumer.after_commit_before_ack",
              commit_interval_s: float = COMMIT_INTERVAL_S,
              gathering: Gathering = Gathering()) -> BatchSubscriber:
    """``crash_point`` names the window between the database commit and the offset commit
    (docs/design.md §6 calls it ``intake.after_commit`` for the intake). Returns the subscriber, whose
    aiokafka consumer (once started) the health checks ask about its partitions."""
    failures = 0
    commits = CoalescedCommits(commit_interval_s)
    subscriber = broker.subscriber(*topics, group_id=group_id, batch=True, max_records=max_records,
                                   fetch_max_wait_ms=gathering.max_wait_ms,
                                   fetch_min_bytes=gathering.min_bytes,
                                   batch_timeout_ms=IDLE_WAIT_MS, auto_offset_reset="earliest",
                                   ack_policy=AckPolicy.MANUAL, parser=_utf8_safe_parser,
                                   decoder=_the_message_itself, listener=commits,
                                   title=f"{consumer.name}:{','.join(topics)}")

    subscriber.get_msg = _waiting_for_records(max_records, commits)
    subscriber.stop = _committing_first(subscriber.stop, commits)

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
        await commits.applied(message.consumer, records)
        lag.record(group_id, message.consumer, records)

    return subscriber


def _waiting_for_records(max_records: int, commits: CoalescedCommits) -> Callable[
        [AIOKafkaConsumer], Awaitable[tuple[ConsumerRecord, ...]]]:
    """The subscriber's poll. FastStream's own waits ``batch_timeout_ms`` and, finding nothing,
    sleeps as long again before it polls anew: records arriving during that sleep wait for it,
    so the timeout had to be a few milliseconds, and every idle consumer woke up hundreds of
    times a second (a tenth of a core for the pipeline's five, doing nothing). aiokafka's
    ``getmany`` returns as soon as records are fetched, so a long wait costs no latency. Only
    a poll answered empty at once (no partitions yet, a rebalance) is followed by a pause, so
    that it cannot spin. Staged offsets are committed here, when due, and shorten the wait to
    when they fall due."""

    async def get_msg(consumer: AIOKafkaConsumer) -> tuple[ConsumerRecord, ...]:
        await commits.commit_if_due()
        wait_ms = commits.wait_ms(IDLE_WAIT_MS)
        began = time.monotonic()
        fetched = await consumer.getmany(timeout_ms=wait_ms, max_records=max_records)
        if not fetched and time.monotonic() - began < wait_ms / 2000:
            await asyncio.sleep(IDLE_WAIT_MS / 1000)
        return tuple(chain.from_iterable(fetched.values()))

    return get_msg


def _committing_first(stop_subscriber: Callable[[], Awaitable[None]],
                      commits: CoalescedCommits) -> Callable[[], Awaitable[None]]:
    """The subscriber's ``stop`` lets the batch in flight finish, then stops the aiokafka
    consumer, with nothing in between to commit staged offsets (FastStream builds the
    subscriber's class itself, so there is no subclass to give it). Closing the commits first
    commits what is staged and makes the batch in flight commit its own offsets."""

    async def stop() -> None:
        await commits.close()
        await stop_subscriber()

    return stop


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
