"""Argument paths: ``amount``, ``payee.wallet_id``, ``tags[]``, ``lines[].price``.

Segments are separated by dots; ``name[]`` means "every item of the array ``name``". A path
is resolved twice: against the argument schema when the registry loads (so a rule or key field
that names nothing is refused up front) and against each proposal's arguments.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from shared.tools.rejections import Rejection, RejectionCode

EACH = "[]"
"""The segment that stands for every item of an array."""

MISSING = object()
"""What ``value_at`` returns when the arguments do not contain the path."""

_SEGMENT = re.compile(r"([A-Za-z_][A-Za-z0-9_-]*)((?:\[\])*)")


def parse_path(text: str) -> tuple[str, ...]:
    segments: list[str] = []
    for part in text.split("."):
        match = _SEGMENT.fullmatch(part)
        if not match:
            raise ValueError(f"{text!r} is not an argument path such as 'a.b', 'tags[]' or 'lines[].price'")
        segments.append(match[1])
        segments.extend([EACH] * (len(match[2]) // 2))
    return tuple(segments)


def schema_at(schema: dict[str, Any], segments: tuple[str, ...]) -> dict[str, Any] | None:
    """The sub-schema a path names, through ``properties`` and ``items``; None if it names nothing."""
    for segment in segments:
        child = schema.get("items") if segment == EACH else schema.get("properties", {}).get(segment)
        if not isinstance(child, dict):
            return None
        schema = child
    return schema


def required_at(schema: dict[str, Any], segments: tuple[str, ...]) -> bool:
    """Whether every object on the way lists the next field as required (no ``[]`` allowed)."""
    for segment in segments:
        if segment == EACH or segment not in schema.get("required", ()):
            return False
        schema = schema.get("properties", {}).get(segment)
        if not isinstance(schema, dict):
            return False
    return True


def value_at(value: Any, segments: tuple[str, ...]) -> Any:
    for segment in segments:
        if not isinstance(value, dict) or segment not in value:
            return MISSING
        value = value[segment]
    return value


def transform(value: Any, segments: tuple[str, ...], change: Callable[[Any, str], Any],
              where: str = "$") -> Any:
    """A copy of ``value`` with ``change(old, where)`` applied wherever the path matches.

    An absent optional field is left alone; a container of the wrong kind is refused, because
    an unapplied rule would hash a non-canonical value.
    """
    if not segments:
        return change(value, where)
    head, rest = segments[0], segments[1:]
    if head == EACH:
        if not isinstance(value, list):
            raise Rejection(RejectionCode.ARGUMENTS_INVALID, f"{where}: expected an array")
        return [transform(item, rest, change, f"{where}[{i}]") for i, item in enumerate(value)]
    if not isinstance(value, dict):
        raise Rejection(RejectionCode.ARGUMENTS_INVALID, f"{where}: expected an object")
    if head not in value:
        return value
    return {**value, head: transform(value[head], rest, change, f"{where}.{head}")}
