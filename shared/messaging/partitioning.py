"""Which partition a keyed record goes to: Kafka's default partitioner (murmur2 of the key),
the one every Kafka client uses by default.

The relay places records with it, and an agent reads only the partition its run id goes to;
both must pick the same, so both call this (aiokafka's own partitioner, never a copy)."""

from __future__ import annotations

from collections.abc import Iterable

from aiokafka.partitioner import DefaultPartitioner

_PARTITIONER = DefaultPartitioner()


def partition_for(key: bytes, partitions: Iterable[int]) -> int:
    """The partition of ``key`` among all of a topic's ``partitions`` (available or not:
    a key's partition must not move while a leader is away)."""
    every = sorted(partitions)
    return _PARTITIONER(key, every, every)
