"""The sync facade runs the same client on a loop of its own: its errors are the client's,
and a failed start leaves no thread behind."""

from __future__ import annotations

import socket
import threading

import pytest
from aiokafka.errors import KafkaConnectionError

from intentledger_client import SyncClient


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_a_client_that_cannot_reach_its_broker_raises_and_leaves_no_thread() -> None:
    before = {t.name for t in threading.enumerate()}
    with pytest.raises(KafkaConnectionError):
        SyncClient(f"127.0.0.1:{closed_port()}", principal_id="agent-7", tenant_id="acme")
    assert "intentledger-client" not in {t.name for t in threading.enumerate()} - before


def test_an_invalid_tenant_is_refused_before_anything_connects() -> None:
    with pytest.raises(ValueError, match="not a tenant id"):
        SyncClient("127.0.0.1:1", principal_id="agent-7", tenant_id="Acme.EU")
