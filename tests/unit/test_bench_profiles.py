"""The profile summary of ``--profile-rate``: time in the event loop's native code is told
apart from time in Python, and the inclusive list names this repository's functions."""

from __future__ import annotations

from pathlib import Path

from bench.e2e.profiles import _summarise

LOOP = ("_run_module_as_main (<frozen runpy>:198);run (uvloop/__init__.py:92)"
        ";Runner.run (asyncio/runners.py:118)")
HANDLER = (f"{LOOP};SubscriberUsecase.consume (faststream/_internal/endpoint/subscriber/usecase.py:347)"
           ";Relay.relay_batch (services/relay/relay.py:123)")


def summary_of(tmp_path: Path, lines: list[str]) -> dict:
    path = tmp_path / "relay-60.txt"
    path.write_text("\n".join(lines) + "\n")
    return _summarise(path)


def test_samples_in_the_loops_native_code_are_counted_apart(tmp_path: Path) -> None:
    summary = summary_of(tmp_path, [
        f"{LOOP} 60",
        f"{HANDLER};Connection.fetch (asyncpg/connection.py:717) 30",
        f"{HANDLER} 10",
    ])
    assert summary["samples"] == 100
    assert summary["loop_percent"] == 60.0
    assert summary["python_samples"] == 40
    assert summary["self_percent"] == [("Connection.fetch (asyncpg/connection.py:717)", 75.0),
                                       ("Relay.relay_batch (services/relay/relay.py:123)", 25.0)]


def test_the_inclusive_list_names_only_our_functions(tmp_path: Path) -> None:
    summary = summary_of(tmp_path, [
        f"{HANDLER};partition_for (intentledger_client/topics.py:43) 3",
        f"{HANDLER} 1",
    ])
    assert summary["inclusive_percent"] == [
        ("Relay.relay_batch (services/relay/relay.py:123)", 100.0),
        ("partition_for (intentledger_client/topics.py:43)", 75.0)]


def test_a_profile_of_an_idle_process_has_no_python_shares(tmp_path: Path) -> None:
    summary = summary_of(tmp_path, [f"{LOOP} 5", "not a sample", ""])
    assert (summary["samples"], summary["loop_percent"], summary["self_percent"]) == (5, 100.0, [])
