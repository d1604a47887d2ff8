"""Named fault-injection points (docs/design.md §6), inert unless enabled by environment.

``INTENTLEDGER_FAULTS`` holds comma-separated rules ``point=action[:arg][@nth]``:

- ``exit`` ends the process at once with ``os._exit`` (no cleanup, no flush: a crash);
- ``drop`` raises ``ResponseDropped`` so the caller behaves as if the reply never arrived;
- ``delay:SECONDS`` sleeps before continuing.

Without ``@nth`` a rule fires on every hit; with it, only on that hit (1-based). Code calls
``await hit("relay.after_publish_before_mark")`` at the named place; with no rule for the
point this is a dictionary lookup. Every firing is announced on stderr (``fault injected:
<point> -> <action>``): a fault protocol that never fired its fault has tested nothing, and the
chaos runner reads this line to tell.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections import Counter
from dataclasses import dataclass

EXIT_CODE = 86
"""Exit status of an injected crash, distinct from ordinary failures in test reports."""


class ResponseDropped(Exception):
    """Injected: the remote side acted, but its response is lost on the way back."""


@dataclass(frozen=True)
class FaultRule:
    action: str
    argument: float | None = None
    nth: int | None = None


def parse_rules(spec: str) -> dict[str, FaultRule]:
    rules: dict[str, FaultRule] = {}
    for item in filter(None, (part.strip() for part in spec.split(","))):
        point, _, action_spec = (part.strip() for part in item.partition("="))
        action_spec, _, nth = action_spec.partition("@")
        action, _, argument = action_spec.partition(":")
        if point in rules:
            raise ValueError(f"bad fault rule {item!r}: {point} already has a rule")
        rules[point] = _rule(item, point, action, argument, nth)
    return rules


def _rule(item: str, point: str, action: str, argument: str, nth: str) -> FaultRule:
    """Refuse rules that would silently never fire or mean something else than they say."""
    wanted = "want point=exit|drop|delay:SECONDS, optionally @N with N >= 1"
    valid = (
        point
        and action in {"exit", "drop", "delay"}
        and (action == "delay") == bool(argument)
        and (not nth or nth.isdigit() and int(nth) >= 1)
    )
    try:
        seconds = float(argument) if argument else None
    except ValueError:
        valid = False
    if not valid or (seconds is not None and seconds < 0):
        raise ValueError(f"bad fault rule {item!r}: {wanted}")
    return FaultRule(action=action, argument=seconds, nth=int(nth) if nth else None)


_rules = parse_rules(os.environ.get("INTENTLEDGER_FAULTS", ""))
_hits: Counter[str] = Counter()


def configure(spec: str) -> None:
    """Replace the active rules (tests in one process; services read the environment)."""
    global _rules
    _rules = parse_rules(spec)
    _hits.clear()


async def hit(point: str) -> None:
    rule = _rules.get(point)
    if rule is None:
        return
    _hits[point] += 1
    if rule.nth is not None and _hits[point] != rule.nth:
        return
    print(f"fault injected: {point} -> {rule.action}", file=sys.stderr, flush=True)
    if rule.action == "exit":
        os._exit(EXIT_CODE)
    if rule.action == "drop":
        raise ResponseDropped(point)
    await asyncio.sleep(rule.argument or 0.0)
