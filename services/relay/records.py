"""Turning an outbox row into a Kafka record, or into the reason it can never be one."""

from __future__ import annotations

import json
import re
import uuid
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
    """Check what the broker or a consumer would choke on; a bad row must not block others.

    The envelope was validated when it was written; this guards against rows written by hand,
    by an older version, or corrupted, without paying a full model validation per row.
    """
    position = row["position"]
    if not _TOPIC.match(row["topic"] or ""):
        return Unpublishable(position, f"invalid topic name {row['topic']!r}")
    try:
        envelope = json.loads(row["envelope"])
        headers = json.loads(row["headers"])
    except ValueError as error:
        return Unpublishable(position, f"unparseable JSON: {error}")
    if not isinstance(envelope, dict) or not isinstance(headers, dict):
        return Unpublishable(position, "envelope and headers must be JSON objects")
    if not all(isinstance(v, str) for v in headers.values()):
        return Unpublishable(position, "header values must be strings")
    if _as_uuid(envelope.get("event_id")) != row["event_id"]:
        return Unpublishable(position, "envelope event_id does not match the row's event_id")
    if envelope.get("run_id") != row["partition_key"] or not envelope.get("event_type"):
        return Unpublishable(position, "envelope lacks event_type or its run_id is not the key")
    value = row["envelope"].encode()
    encoded_headers = [(name, text.encode()) for name, text in headers.items()]
    size = len(value) + len(row["partition_key"]) + sum(len(n) + len(v) for n, v in encoded_headers)
    if size > max_message_bytes:
        return Unpublishable(position, f"oversized: {size} bytes > limit {max_message_bytes}")
    return KafkaRecord(position, row["topic"], row["partition_key"].encode(), value, encoded_headers)


def _as_uuid(text: object) -> uuid.UUID | None:
    try:
        return uuid.UUID(str(text))
    except ValueError:
        return None
