"""The operation key of a framework's tool call: the same (run, tool-call id), the same key;
any other pair, another key; always one the intake accepts."""

from __future__ import annotations

import pytest

from intentledger_client.keys import call_key


def test_the_same_call_of_the_same_run_has_the_same_key() -> None:
    assert call_key("run-1", "call_a") == call_key("run-1", "call_a")


def test_a_call_id_reused_in_another_run_or_a_shifted_separator_is_another_intent() -> None:
    keys = {call_key("run-1", "call_a"), call_key("run-2", "call_a"), call_key("run-1", "call_b"),
            call_key("a:b", "c"), call_key("a", "b:c")}
    assert len(keys) == 5


def test_the_key_fits_the_intake_whatever_the_ids() -> None:
    key = call_key("r" * 400, "c" * 400 + "\n")
    assert len(key) <= 255 and key.isprintable()


@pytest.mark.parametrize("run_id, call_id", [("", "call_a"), ("run-1", "")])
def test_a_missing_id_is_refused_rather_than_keyed(run_id: str, call_id: str) -> None:
    with pytest.raises(ValueError):
        call_key(run_id, call_id)
