"""What PostgreSQL plans for the statements a piece of code sends: the hot-query tests run the
real code through ``Explaining`` and look for nodes that read a whole table."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

import asyncpg

CUSTOM, GENERIC = "force_custom_plan", "force_generic_plan"


class Explaining:
    """A connection that asks for the plan of every statement before running it, once per
    ``modes`` (a prepared statement falls back to the generic plan after five executions).
    Used inside a transaction: the mode is set with ``SET LOCAL``."""

    def __init__(self, conn: asyncpg.Connection, modes: tuple[str, ...] = (CUSTOM, GENERIC)) -> None:
        self._conn = conn
        self._modes = modes
        self.plans: list[tuple[str, str, dict[str, Any]]] = []
        """(mode, statement, plan) for every statement sent."""

    async def _explain(self, sql: str, args: tuple[Any, ...]) -> None:
        for mode in self._modes:
            await self._conn.execute(f"SET LOCAL plan_cache_mode = {mode}")
            plan = await self._conn.fetchval(f"EXPLAIN (FORMAT JSON) {sql}", *args)
            self.plans.append((mode, sql, json.loads(plan)[0]["Plan"]))

    async def fetch(self, sql: str, *args: Any) -> list[asyncpg.Record]:
        await self._explain(sql, args)
        return await self._conn.fetch(sql, *args)

    async def fetchrow(self, sql: str, *args: Any) -> asyncpg.Record | None:
        await self._explain(sql, args)
        return await self._conn.fetchrow(sql, *args)

    async def fetchval(self, sql: str, *args: Any) -> Any:
        await self._explain(sql, args)
        return await self._conn.fetchval(sql, *args)

    async def execute(self, sql: str, *args: Any) -> str:
        await self._explain(sql, args)
        return await self._conn.execute(sql, *args)


def nodes(plan: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield plan
    for child in plan.get("Plans", ()):
        yield from nodes(child)


def whole_table_reads(plans: Iterable[tuple[str, str, dict[str, Any]]],
                      tables: set[str]) -> list[str]:
    """Every sequential scan of one of ``tables``, named with its mode and statement."""
    return [f"{mode}: reads all of {node['Relation Name']}: {sql[:100]}"
            for mode, sql, plan in plans for node in nodes(plan)
            if node["Node Type"] == "Seq Scan" and node.get("Relation Name") in tables]
