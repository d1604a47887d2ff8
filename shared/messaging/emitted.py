"""``outbox.emitted``: what the services decided, counted where every decision leaves — the
outbox rows of a transaction that committed (a rolled-back one counts nothing).

One counter by event type and reason code answers the operator's questions without a counter
per decision in each service: policy denials (``AuthorizationDenied`` by reason), capability
verification failures (``DispatchRefused`` with a ``capability_*`` reason), intake refusals.
The reason label takes only codes of the reason catalog, so a free-text field can never
explode the series count.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache

from shared import metric_catalog
from shared.messaging.outbox import OutboxMessage

_EMITTED = metric_catalog.counter("outbox.emitted")


@cache
def _codes() -> frozenset[str]:
    from shared.messaging.reason_catalog import reason_codes  # imports every contract: lazily

    return frozenset(reason_codes())


def reason_of(payload: dict) -> str:
    """The stable code an event carries (``reason_code`` or ``reason``); "" when it has none,
    ``other`` when it is not a catalogued code."""
    reason = payload.get("reason_code") or payload.get("reason")
    if not reason:
        return ""
    return reason if isinstance(reason, str) and reason in _codes() else "other"


def count(schema: str, messages: Sequence[OutboxMessage]) -> None:
    for message in messages:
        envelope = message.envelope
        _EMITTED.add(1, {"schema": schema, "topic": message.topic, "event_type": envelope.event_type,
                         "reason": reason_of(envelope.payload)})
