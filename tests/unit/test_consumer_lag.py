"""Consumer lag: the high watermark the fetch reported, minus the next offset to apply."""

from __future__ import annotations

from types import SimpleNamespace

from shared.messaging import lag


class Fetched:
    def __init__(self, highwaters: dict[tuple[str, int], int | None]) -> None:
        self._highwaters = highwaters

    def highwater(self, partition):
        return self._highwaters[(partition.topic, partition.partition)]


def records(topic: str, partition: int, *offsets: int):
    return [SimpleNamespace(topic=topic, partition=partition, offset=o) for o in offsets]


def test_lag_is_what_the_partition_holds_beyond_the_last_applied_offset():
    batch = records("t", 0, 10, 11, 12) + records("t", 1, 3)
    lag.record("group-a", Fetched({("t", 0): 40, ("t", 1): 4}), batch)
    assert lag.current("group-a") == {("t", 0): 27, ("t", 1): 0}


def test_a_partition_without_a_known_high_watermark_keeps_its_last_lag():
    lag.record("group-b", Fetched({("t", 0): 20}), records("t", 0, 4))
    lag.record("group-b", Fetched({("t", 0): None}), records("t", 0, 5))
    assert lag.current("group-b") == {("t", 0): 15}
