"""A call's withdrawal as the policy reads it on ``ledger.approvals``: a ``CallWithdrawal`` in
the ledger's event envelope, whose routing fields are in the record's headers too (the ledger
refuses a record whose two copies disagree: ``shared/messaging/envelope.py``). Written here
because the client imports nothing of the server; a test has the server's own decoding read
it (``tests/unit/test_client_withdrawals.py``)."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime
from typing import Any

import uuid_utils

from intentledger_client.contracts import (CALL_WITHDRAWAL_REQUESTED, ENVELOPE_CONTENT_TYPE,
                                           ENVELOPE_HEADERS, CallWithdrawal)
from intentledger_client.tracing import current_traceparent

PRODUCER = "intentledger-client"


def record(withdrawal: CallWithdrawal) -> tuple[bytes, list[tuple[str, bytes]]]:
    """The record's value and its envelope headers. Its event id is a fresh UUIDv7, as every
    event's is: the policy records each withdrawal once by it, however often it is read."""
    envelope: dict[str, Any] = {
        "event_id": str(uuid.UUID(bytes=uuid_utils.uuid7().bytes)),
        "event_type": CALL_WITHDRAWAL_REQUESTED, "schema_version": 1,
        "occurred_at": datetime.now(UTC).isoformat(), "run_id": withdrawal.run_id,
        "producer": PRODUCER, "correlation_id": withdrawal.run_id, "causation_id": None,
        "traceparent": current_traceparent(), "payload": withdrawal.model_dump(mode="json")}
    headers = [(name, str(envelope[name]).encode()) for name in ENVELOPE_HEADERS
               if envelope[name] is not None]
    return json.dumps(envelope).encode(), [*headers,
                                           ("content-type", ENVELOPE_CONTENT_TYPE.encode())]
