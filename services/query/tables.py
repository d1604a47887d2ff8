"""Aligned text columns for people reading the operator CLI in a terminal; every cell is
``printable`` (an id with a newline or an escape sequence cannot forge a row or the screen)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from shared.terminal import printable

WIDEST = 60
"""Longer cells (reasons, payloads) are cut here; ``--json`` has them whole."""


def render(rows: Sequence[Mapping[str, Any]], columns: Sequence[str]) -> str:
    cells = [[_cell(row.get(column)) for column in columns] for row in rows]
    header = [column.upper() for column in columns]
    widths = [max(len(line[i]) for line in [header, *cells]) for i in range(len(columns))]
    lines = ["  ".join(value.ljust(width) for value, width in zip(line, widths, strict=True)).rstrip()
             for line in [header, *cells]]
    if not rows:
        lines.append("(none)")
    return "\n".join(lines)


def age(seconds: float) -> str:
    """``95`` → ``1m35s``; ``7322`` → ``2h02m``; days past 48 hours."""
    whole = int(seconds)
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s" if whole >= 60 else f"{whole}s"
    if whole < 48 * 3600:
        return f"{whole // 3600}h{whole % 3600 // 60:02d}m"
    return f"{whole // 86400}d{whole % 86400 // 3600:02d}h"


def _cell(value: Any) -> str:
    text = "-" if value is None else printable(str(value))
    return text if len(text) <= WIDEST else text[:WIDEST - 1] + "…"
