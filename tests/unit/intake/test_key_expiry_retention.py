"""Which tools' intents expire, and after how long: keys name intents across a tool's versions,
so a tool expires only if every version declares a retention, after the longest."""

from __future__ import annotations

from services.proposal_intake.expiry import retention_by_tool
from tests.unit.tools.builders import entry, refusal, registry_of


def test_a_tool_expires_after_its_longest_retention_and_only_if_every_version_declares_one():
    registry = registry_of(
        entry(name="ledger.post", version="1", ledger_key_retention_seconds=60),
        entry(name="ledger.post", version="2", ledger_key_retention_seconds=600),
        entry(name="ledger.void", version="1", ledger_key_retention_seconds=60),
        entry(name="ledger.void", version="2"),
        entry(name="ledger.read", version="1"))
    assert retention_by_tool(registry) == {"ledger.post": 600}


def test_a_retention_must_be_positive():
    assert "ledger_key_retention_seconds" in refusal(
        {"tools": [entry(ledger_key_retention_seconds=0)]})
