"""Baselines and the peer that the end-to-end benchmark measures in the same run.

Each module has one coroutine ``run(endpoints, **size)`` returning a small dict of figures (see
each module's docstring for what it measures and why the comparison is fair). Every figure is
taken with full durability: PostgreSQL ``synchronous_commit=on`` (checked), Kafka ``acks=all``
with idempotence. Each cleans up what it creates (scratch schema, topics or database).

    python -m bench.baselines NAME [--option V] ...

NAME is one of ``NAMES``: skeleton, pgbench, kafka_raw, faststream_vs_raw, dbos_peer, hop_floor.
"""

from __future__ import annotations

import importlib
from collections.abc import Awaitable, Callable

NAMES = ("skeleton", "pgbench", "kafka_raw", "faststream_vs_raw", "dbos_peer", "hop_floor")
"""In the order ``bench.e2e`` runs them: the skeleton first, on Kafka and PostgreSQL as the
pipeline left them, before the other baselines load them (scratch topics of 100,000 records
produced and deleted, pgbench's tables, the peer's workflows): it is compared with the
pipeline step for step."""


def baseline(name: str) -> Callable[..., Awaitable[dict]]:
    """``run`` of the baseline ``name`` (imported lazily: dbos is only in the bench extra)."""
    if name not in NAMES:
        raise KeyError(f"unknown baseline {name!r}: one of {', '.join(NAMES)}")
    return importlib.import_module(f"bench.baselines.{name}").run
