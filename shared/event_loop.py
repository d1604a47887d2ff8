"""The event loop a service process runs on: uvloop, where it exists.

Every service spends most of its CPU on round trips (a PostgreSQL statement, a Kafka request):
on the 2-core benchmark machine asyncio's loop cost about 75 µs of client CPU per asyncpg
round trip and uvloop about 37 µs, the same statements, the same guarantees. uvloop is not built
for Windows; there the standard loop runs.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

try:
    import uvloop
except ImportError:  # pragma: no cover - Windows
    uvloop = None

T = TypeVar("T")


def run(main: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run`` on the fastest loop available."""
    return uvloop.run(main) if uvloop is not None else asyncio.run(main)
