"""Evaluating a protocol's assertions over measured facts, each with the evidence it was judged on."""

from __future__ import annotations

import asyncio
import json
import operator
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from intentledger.chaos.facts import Facts
from intentledger.chaos.quiescence import LOOK_INTERVAL_S
from shared.contracts.fault_protocol import CALL_FACTS, FAULT_FACTS, RUN_FACTS, Assertion

_MISSING = object()
COMPARE = {"==": operator.eq, "!=": operator.ne, ">=": operator.ge, "<=": operator.le,
           ">": operator.gt, "<": operator.lt,
           "contains": lambda measured, value: value in measured,
           "not_contains": lambda measured, value: value not in measured,
           "in": lambda measured, value: measured in value,
           "mentions": lambda measured, value: str(value) in json.dumps(measured, default=str),
           "not_mentions": lambda measured, value: str(value) not in json.dumps(measured,
                                                                                default=str)}


@dataclass(frozen=True)
class Verdict:
    subject: str
    """What was measured, as a person reads it: ``business_effects of debit (at crash)``."""
    expected: str
    measured: Any
    holds: bool
    why: str | None = None


async def final_facts(measure: Callable[[], Awaitable[Facts]], assertions: list[Assertion],
                      snapshots: dict[str, Facts], deadline: float,
                      interval_s: float = LOOK_INTERVAL_S) -> Facts:
    """The facts to judge on: measured again while an ``eventually`` assertion does not hold
    and ``deadline`` (monotonic) is ahead. Every assertion is then judged on that one later
    measurement, so what the awaited action did before it (a woken worker's send, before its
    refused write) is judged too."""
    awaited = [assertion for assertion in assertions if assertion.eventually]
    while True:
        facts = await measure()
        if time.monotonic() >= deadline or all(
                evaluate(assertion, facts, snapshots).holds for assertion in awaited):
            return facts
        await asyncio.sleep(interval_s)


def evaluate(assertion: Assertion, final: Facts, snapshots: dict[str, Facts]) -> Verdict:
    facts = final if assertion.at is None else snapshots.get(assertion.at)
    subject = _subject(assertion)
    expected = f"{assertion.op} {assertion.value!r}"
    if facts is None:
        return Verdict(subject, expected, "fault never fired: no facts at that moment", False,
                       assertion.why)
    measured = _lookup(assertion, facts)
    if measured is _MISSING:
        return Verdict(subject, expected, "not measured", False, assertion.why)
    try:
        holds = bool(COMPARE[assertion.op](measured, assertion.value))
    except TypeError:
        holds = False
    return Verdict(subject, expected, measured, holds, assertion.why)


def _lookup(assertion: Assertion, facts: Facts) -> Any:
    if assertion.fact in CALL_FACTS:
        value = facts.calls.get(assertion.call or "", {}).get(assertion.fact, _MISSING)
    elif assertion.fact in RUN_FACTS:
        value = _run_of(assertion, facts).get(assertion.fact, _MISSING)
    elif assertion.fact in FAULT_FACTS:
        value = facts.faults.get(assertion.fault or "", _MISSING)
    elif assertion.fact == "wallet_balance_minor":
        value = facts.wallets.get(assertion.wallet or "", _MISSING)
    elif assertion.fact == "stock_available":
        value = facts.stock.get(assertion.sku or "", _MISSING)
    else:
        value = facts.scenario.get(assertion.fact, _MISSING)
    for step in (assertion.field.split(".") if assertion.field else []):
        value = value.get(step, _MISSING) if isinstance(value, dict) else _MISSING
    return value


def _run_of(assertion: Assertion, facts: Facts) -> dict[str, Any]:
    """The named run of the assertion's tenant, or of the one tenant that proposed in it."""
    found = [run for (name, tenant), run in facts.runs.items() if name == assertion.run
             and assertion.tenant in (None, tenant)]
    return found[0] if len(found) == 1 else {}


def _subject(assertion: Assertion) -> str:
    of = assertion.call or assertion.run or assertion.fault or assertion.wallet or assertion.sku
    text = assertion.fact + (f".{assertion.field}" if assertion.field else "")
    text += f" of {of}" if of else ""
    text += f" of tenant {assertion.tenant}" if assertion.tenant and assertion.run else ""
    return text + (f" (at {assertion.at})" if assertion.at else "")
