"""Turning a claimed outbox row into a Kafka record, or into the reason it can never be one."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

_TOPIC = re.compile(r"^[A-Za-z0-9._-]{1,249}$")


@dataclass(frozen=True)
class KafkaRecord:
    position: int
    topic: str
    key: bytes
    value: bytes
    headers: list[tuple[str, bytes]]


@dataclass(frozen=True)
class Unpublishable:
    position: int
    reason: str


def to_record(row, max_message_bytes: int) -> KafkaRecord | Unpublishable:
    """Refuse what the broker or every consumer would choke on; a bad row must not block others.

    Envelopes are validated when written; this guards against rows written by hand, by an
    older version, or corrupted. The envelope checks themselves run in the claim query.
    """
    position = row["position"]
    if not _TOPIC.fullmatch(row["topic"] or "") or row["topic"] in {".", ".."}:
        return Unpublishable(position, f"invalid topic name {row['topic']!r}")
    if not row["envelope_matches_row"]:
        return Unpublishable(position, "envelope is not an object whose event_id, run_id and "
                                       "event_type match the row's event_id and partition key")
    if not row["headers_are_object"]:
        return Unpublishable(position, "headers must be a JSON object")
    value, key = row["envelope"].encode(), row["partition_key"].encode()
    size = len(value) + len(row["headers"].encode()) + len(key)  # headers: an upper bound
    if size > max_message_bytes:
        return Unpublishable(position, f"oversized: {size} bytes > limit {max_message_bytes}")
    headers = json.loads(row["headers"])
    try:
        encoded = [(name, text.encode()) for name, text in headers.items()]
    except AttributeError:
        return Unpublishable(position, "header values must be strings")
    return KafkaRecord(position, row["topic"], key, value, encoded)
