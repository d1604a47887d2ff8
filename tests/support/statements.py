"""Counting the statements a piece of code sends on one connection (asyncpg's query logger):
how the set-based hops are held to a number of statements that does not grow with a batch."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import asyncpg


@contextmanager
def counted(conn: asyncpg.Connection) -> Iterator[list[str]]:
    """The queries sent on ``conn`` inside the block, in order."""
    queries: list[str] = []

    def logged(record) -> None:
        queries.append(record.query)

    conn.add_query_logger(logged)
    try:
        yield queries
    finally:
        conn.remove_query_logger(logged)
