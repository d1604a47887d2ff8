"""Keyset pagination: a page ends at a row, the next one starts strictly after its sort key.

Listings sort by keys that never change once a row exists (run id, UUIDv7 call id, history
position, ...), so rows updated while someone pages can neither repeat nor vanish. A cursor is
opaque to clients: the listing's name and the last row's key, and a cursor of one listing is
refused by another.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from services.query.errors import invalid_cursor


@dataclass
class Select:
    """WHERE clauses with numbered parameters, built up one filter at a time."""

    clauses: list[str] = field(default_factory=list)
    args: list[Any] = field(default_factory=list)

    def param(self, value: Any) -> str:
        self.args.append(value)
        return f"${len(self.args)}"

    def where(self, clause: str, *values: Any) -> None:
        """``clause`` has one ``{}`` per value, replaced by its parameter."""
        self.clauses.append(clause.format(*(self.param(value) for value in values)))

    def where_optional(self, clause: str, value: Any) -> None:
        if value not in (None, [], ()):
            self.where(clause, value)

    def sql(self) -> str:
        return f"WHERE {' AND '.join(self.clauses)}" if self.clauses else ""


@dataclass(frozen=True)
class Keyset:
    listing: str
    columns: tuple[tuple[str, str], ...]
    """(column, SQL type) in sort order; the cursor carries each as text."""

    def order_by(self) -> str:
        return "ORDER BY " + ", ".join(column for column, _ in self.columns)

    def start_after(self, select: Select, cursor: str | None) -> None:
        if cursor is None:
            return
        values = self.decode(cursor)
        bounds = ", ".join(f"{select.param(value)}::text::{sql_type}"
                           for value, (_, sql_type) in zip(values, self.columns, strict=True))
        select.clauses.append(f"({', '.join(c for c, _ in self.columns)}) > ({bounds})")

    def next_cursor(self, rows: Sequence[Mapping[str, Any]], limit: int) -> str | None:
        """A cursor after the page's last row when a further row exists (``limit + 1`` fetched)."""
        if len(rows) <= limit:
            return None
        last = rows[limit - 1]
        payload = json.dumps([self.listing, [str(last[column]) for column, _ in self.columns]])
        return base64.urlsafe_b64encode(payload.encode()).decode().rstrip("=")

    def decode(self, cursor: str) -> list[str]:
        """The sort key after which the next page starts, as text."""
        try:
            listing, values = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
        except (ValueError, TypeError, binascii.Error):
            raise invalid_cursor() from None
        if (listing != self.listing or not isinstance(values, list) or len(values) != len(self.columns)
                or not all(isinstance(value, str) for value in values)):
            raise invalid_cursor()
        return values
