"""The console's resolve form publishes where the dispatcher reads resolutions: a deployment
that renames the dispatcher's topic renames the form's with the same variable."""

from __future__ import annotations

from services.query.console.settings import ConsoleSettings
from shared.topology import LEDGER_RESOLUTIONS


def test_the_form_publishes_where_the_dispatcher_is_configured_to_read(monkeypatch):
    monkeypatch.delenv("INTENTLEDGER_CONSOLE_RESOLUTIONS_TOPIC", raising=False)
    monkeypatch.delenv("INTENTLEDGER_DISPATCHER_RESOLUTIONS_TOPIC", raising=False)
    assert ConsoleSettings().resolutions_topic == LEDGER_RESOLUTIONS
    monkeypatch.setenv("INTENTLEDGER_DISPATCHER_RESOLUTIONS_TOPIC", "ops.resolutions")
    assert ConsoleSettings().resolutions_topic == "ops.resolutions"
    monkeypatch.setenv("INTENTLEDGER_CONSOLE_RESOLUTIONS_TOPIC", "console.resolutions")
    assert ConsoleSettings().resolutions_topic == "console.resolutions"
