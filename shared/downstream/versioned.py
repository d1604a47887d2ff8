"""Rows a batch read under lock with their version, changed in memory by compare-and-swap and
written back only from the version read (the batch counterpart of ``UPDATE … WHERE version =
$read``): a downstream's balances and stock levels."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from typing import Any, Generic, TypeVar

from shared.db.plans import hidden_columns

Row = TypeVar("Row")


class VersionedRows(Generic[Row]):
    def __init__(self, rows: Iterable[Row], key: Callable[[Row], str]) -> None:
        self._key = key
        self._rows = {key(row): row for row in rows}
        self._read = {name: row.version for name, row in self._rows.items()}

    def get(self, name: str) -> Row | None:
        return self._rows.get(name)

    def swap(self, row: Row, **changes: Any) -> Row:
        """``row`` with ``changes`` and the next version, if ``row`` is still the current one."""
        name = self._key(row)
        if self._rows[name].version != row.version:
            raise RuntimeError(f"{name} changed under its row lock")
        self._rows[name] = dataclasses.replace(row, version=row.version + 1, **changes)
        return self._rows[name]

    def written_back(self, name: str, table: str, key_column: str,
                     column: str) -> tuple[str, list, dict[str, int]]:
        """The CTE ``name`` that writes ``column`` of every changed row of ``table`` back from
        the version it was read at (parameters ``$1``..``$4``), its arguments, and the number
        of rows it must update (for ``BatchKeys.write``)."""
        changed = [(row, self._read[key]) for key, row in self._rows.items()
                   if row.version != self._read[key]]
        cte = (f"{name} AS (UPDATE {table} t SET {column} = v.value, version = v.version"
               f" FROM unnest({hidden_columns(1, 'text[]', 'int8[]', 'int8[]', 'int8[]')})"
               f" AS v(key, read, value, version)"
               f" WHERE t.{key_column} = v.key AND t.version = v.read RETURNING 1)")
        return cte, [[self._key(row) for row, _ in changed], [read for _, read in changed],
                     [getattr(row, column) for row, _ in changed],
                     [row.version for row, _ in changed]], {name: len(changed)}
