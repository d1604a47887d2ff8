"""Consumer lag (docs/design.md §8): how far each consumer group is behind each partition it reads.

Measured after every applied batch from what the fetch already told us (the partition's high
watermark), so it costs no extra request: ``highwater - (last applied offset + 1)``. Exported
as an OpenTelemetry gauge per group, topic and partition; ``current`` serves tests and tools.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from aiokafka import ConsumerRecord, TopicPartition
from opentelemetry.metrics import CallbackOptions, Observation

from shared import metric_catalog

_lags: dict[tuple[str, str, int], int] = {}


class HighWater(Protocol):
    def highwater(self, partition: TopicPartition) -> int | None: ...


def record(group: str, consumer: HighWater, records: Sequence[ConsumerRecord]) -> None:
    """After ``records`` were applied and acknowledged."""
    last: dict[tuple[str, int], int] = {}
    for item in records:
        where = (item.topic, item.partition)
        last[where] = max(item.offset, last.get(where, -1))
    for (topic, partition), offset in last.items():
        highwater = consumer.highwater(TopicPartition(topic, partition))
        if highwater is not None:
            _lags[(group, topic, partition)] = max(highwater - (offset + 1), 0)


def current(group: str) -> dict[tuple[str, int], int]:
    return {(topic, partition): lag for (g, topic, partition), lag in _lags.items() if g == group}


def _observe(_: CallbackOptions):
    return [Observation(lag, {"consumer_group": group, "topic": topic, "partition": partition})
            for (group, topic, partition), lag in _lags.items()]


metric_catalog.gauge("consumer.lag", _observe)
