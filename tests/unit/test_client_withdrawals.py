"""The agent client writes a withdrawal without the server's code (``intentledger_client
.withdrawals``); the policy reads it with the server's. Here the server's own decoding reads
what the client wrote: a record it would refuse or misread is a withdrawal that never counts."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime

import pytest
from intentledger_client.withdrawals import record

from shared.contracts.withdrawals import CALL_WITHDRAWAL_REQUESTED, CallWithdrawal
from shared.errors import PermanentError
from shared.messaging.envelope import decode, parse

WITHDRAWAL = CallWithdrawal(tenant_id="acme", run_id="run-1", logical_call_id=uuid.uuid4(),
                            principal_id="agent-7", reason="the user changed their mind",
                            decided_at=datetime.now(UTC))


def test_the_server_decodes_the_clients_withdrawal_as_written() -> None:
    value, headers = record(WITHDRAWAL)
    envelope = decode(value, headers)
    assert (envelope.event_type, envelope.run_id, envelope.producer) == (
        CALL_WITHDRAWAL_REQUESTED, "run-1", "intentledger-client")
    assert envelope.event_id.version == 7, "a UUIDv7, as every event id"
    assert parse(envelope, CallWithdrawal) == WITHDRAWAL
    assert {name: raw.decode() for name, raw in headers} == envelope.headers(), \
        "every header the ledger's own envelope carries, and the same values"


def test_each_withdrawal_is_an_event_of_its_own() -> None:
    """The policy records a withdrawal once per event id: two sends are two withdrawals."""
    first, second = (decode(*record(WITHDRAWAL)) for _ in range(2))
    assert first.event_id != second.event_id


def test_a_record_whose_headers_were_changed_is_refused() -> None:
    """The headers are the value's copy: a relay or a proxy rewriting one is caught."""
    value, headers = record(WITHDRAWAL)
    moved = [(name, b"run-2" if name == "run_id" else raw) for name, raw in headers]
    with pytest.raises(PermanentError, match="run_id"):
        decode(value, moved)
    assert json.loads(value)["payload"]["run_id"] == "run-1"
