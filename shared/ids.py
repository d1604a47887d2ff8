"""Event identities.

An event id is a UUIDv7 minted exactly once, when its outbox row is written. It is the
deduplication key for every consumer downstream, so it must survive republishing: never
derive it from a Kafka offset and never mint a new one when a row is sent again.
"""

import uuid

import uuid_utils


def new_event_id() -> uuid.UUID:
    """A time-ordered UUIDv7 (monotonic within a millisecond in this process)."""
    return uuid.UUID(bytes=uuid_utils.uuid7().bytes)
