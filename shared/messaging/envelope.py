"""The event envelope, carried identically in a Kafka record's headers and its value.

Headers let infrastructure (the relay, dedup, tracing, dead-lettering) act without parsing
the value; the value is self-contained so an event read from a dump, a dead-letter table or
the event history means the same thing. ``decode`` refuses a record whose two copies disagree.
"""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime
from typing import Any, TypeVar

from intentledger_client.contracts import ENVELOPE_CONTENT_TYPE, ENVELOPE_HEADERS  # the agents' too
from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, ValidationError

from shared.errors import PermanentError
from shared.ids import new_event_id
from shared.tracing import current_traceparent


class Envelope(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    event_id: uuid.UUID = Field(description="UUIDv7 minted once at the outbox insert; the dedup key.")
    event_type: str = Field(min_length=1, max_length=128)
    schema_version: int = Field(default=1, ge=1)
    occurred_at: AwareDatetime
    run_id: str = Field(min_length=1, max_length=200, description="Partition key: per-run order.")
    producer: str = Field(min_length=1, description="Service that wrote the outbox row.")
    correlation_id: str | None = None
    causation_id: uuid.UUID | None = Field(default=None, description="Event that caused this one.")
    traceparent: str | None = Field(default=None, description="W3C trace context at creation.")
    payload: dict[str, Any]

    @classmethod
    def new(cls, *, event_type: str, run_id: str, producer: str, payload: dict[str, Any],
            causation: Envelope | None = None, traceparent: str | None = None,
            schema_version: int = 1) -> Envelope:
        """A fresh event; causation and correlation are inherited from the causing event, the
        trace context from the span in progress (else from the causing event)."""
        return cls(
            event_id=new_event_id(),
            event_type=event_type,
            schema_version=schema_version,
            occurred_at=datetime.now(UTC),
            run_id=run_id,
            producer=producer,
            correlation_id=(causation.correlation_id or causation.run_id) if causation else run_id,
            causation_id=causation.event_id if causation else None,
            traceparent=(traceparent or current_traceparent()
                         or (causation.traceparent if causation else None)),
            payload=payload,
        )

    def headers(self) -> dict[str, str]:
        values = self.model_dump(mode="json", include=set(ENVELOPE_HEADERS))
        headers = {name: str(value) for name, value in values.items() if value is not None}
        headers["content-type"] = ENVELOPE_CONTENT_TYPE
        return headers

    def value(self) -> bytes:
        return self.model_dump_json().encode()


def decode(value: bytes | None, headers: list[tuple[str, bytes]] | None) -> Envelope:
    """Parse a consumed record; any defect is permanent (retrying the same bytes cannot help)."""
    if not value:
        raise PermanentError("empty record value")
    try:
        envelope = Envelope.model_validate(json.loads(value))
    except (ValueError, ValidationError, RecursionError) as error:
        # RecursionError: JSON nested deeper than the parser's stack; retrying cannot help.
        raise PermanentError(f"value is not an event envelope: {type(error).__name__}") from error
    header_values = {name: raw.decode(errors="replace") for name, raw in headers or []}
    expected = envelope.headers()
    for name in ENVELOPE_HEADERS:
        if name in header_values and header_values[name] != expected.get(name):
            raise PermanentError(f"header {name}={header_values[name]!r} disagrees with the value")
    return envelope


Payload = TypeVar("Payload", bound=BaseModel)


def payload_of(value: bytes | None) -> dict[str, Any]:
    """The payload of a record read off a shared topic by a client, never by a consumer of the
    ledger: someone else's garbage there is nobody's answer and no client's crash, so it is {}."""
    try:
        payload = json.loads(value or b"").get("payload")
    except (ValueError, AttributeError):
        return {}
    return payload if isinstance(payload, dict) else {}


def parse(envelope: Envelope, model: type[Payload]) -> Payload:
    """The envelope's payload as ``model``; a payload its event type does not allow is a
    ``PermanentError``, so the consumer template dead-letters the record with the reason."""
    try:
        return model.model_validate(envelope.payload)
    except ValidationError as error:
        raise PermanentError(f"{envelope.event_type} payload does not fit {model.__name__}: "
                             f"{error}") from error
