"""Fault points must do exactly what a crash test asks of them, and nothing when not asked."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from shared import faults
from shared.faults import FaultRule, ResponseDropped, configure, hit, parse_rules

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def no_faults_left_behind():
    """Rules are process-wide: a rule leaking into the next test would crash or delay it."""
    configure("")
    yield
    configure("")


def test_an_empty_spec_enables_nothing():
    assert parse_rules("") == {}
    assert parse_rules(" , ") == {}


def test_exit_drop_and_delay_parse_with_their_argument():
    assert parse_rules("a=exit") == {"a": FaultRule("exit")}
    assert parse_rules("a=drop") == {"a": FaultRule("drop")}
    assert parse_rules("a=delay:1.5") == {"a": FaultRule("delay", argument=1.5)}


def test_nth_limits_a_rule_to_one_hit():
    assert parse_rules("relay.after_publish_before_mark=exit@3") == {
        "relay.after_publish_before_mark": FaultRule("exit", nth=3)}
    assert parse_rules("a=delay:0.2@2") == {"a": FaultRule("delay", argument=0.2, nth=2)}


def test_several_rules_are_separated_by_commas():
    rules = parse_rules("a=exit@2, b=drop,c=delay:0.5")
    assert rules == {"a": FaultRule("exit", nth=2), "b": FaultRule("drop"),
                     "c": FaultRule("delay", argument=0.5)}


@pytest.mark.parametrize("spec", [
    "a=explode",       # unknown action
    "=exit",           # no point
    "a",               # no action
    "a=",              # empty action
    "a=delay:soon",    # argument is not a number
    "a=exit@second",   # nth is not a number
    "a=exit,b=crash",  # one bad rule spoils the spec
    "a=exit@0",        # the 0th hit never comes
    "a=exit@-1",       # nor does a negative one
    "a=exit:3",        # exit takes no argument
    "a=delay",         # a delay without seconds
    "a=delay:-1",      # a negative delay
    "a=exit,a=drop",   # a second rule for one point would silently replace the first
])
def test_a_malformed_rule_is_refused_instead_of_ignored(spec):
    with pytest.raises(ValueError):
        parse_rules(spec)


async def test_a_point_without_a_rule_does_nothing():
    configure("other=drop")
    await hit("relay.after_publish_before_mark")


async def test_drop_raises_response_dropped_on_every_hit():
    configure("p=drop")
    for _ in range(3):
        with pytest.raises(ResponseDropped):
            await hit("p")


async def test_nth_fires_only_on_that_hit():
    configure("p=drop@2")
    await hit("p")
    with pytest.raises(ResponseDropped):
        await hit("p")
    await hit("p")


async def test_configure_resets_the_hit_count():
    configure("p=drop@1")
    with pytest.raises(ResponseDropped):
        await hit("p")
    configure("p=drop@1")
    with pytest.raises(ResponseDropped):
        await hit("p")


async def test_delay_sleeps_at_least_the_given_seconds():
    configure("p=delay:0.05")
    started = time.monotonic()
    await hit("p")
    assert time.monotonic() - started >= 0.05


def test_exit_ends_the_process_with_the_injected_crash_status():
    script = textwrap.dedent("""
        import asyncio
        from shared import faults
        faults.configure("x=exit")
        asyncio.run(faults.hit("x"))
        print("survived")
    """)
    result = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == faults.EXIT_CODE
    assert "survived" not in result.stdout
    assert "fault injected: x -> exit" in result.stderr
