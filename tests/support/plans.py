"""What PostgreSQL plans for the statements a piece of code sends: the hot-query tests run the
real code through ``Explaining`` and look for nodes that read a whole table, and for scans that
expect a share of a table where a handful of rows is meant."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterable, Iterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import asyncpg

CUSTOM, GENERIC = "force_custom_plan", "force_generic_plan"


class Explaining:
    """A connection that asks for the plan of every statement before running it, once per
    ``modes``: the custom plan, and the generic plan the plan cache keeps after a prepared
    statement's fifth execution when it costs no more. Used inside a transaction: the mode is
    set with ``SET LOCAL``."""

    def __init__(self, conn: asyncpg.Connection, modes: tuple[str, ...] = (CUSTOM, GENERIC)) -> None:
        self._conn = conn
        self._modes = modes
        self.plans: list[tuple[str, str, dict[str, Any]]] = []
        """(mode, statement, plan) for every statement sent."""

    async def _explain(self, sql: str, args: tuple[Any, ...]) -> None:
        for mode in self._modes:
            await self._conn.execute(f"SET LOCAL plan_cache_mode = {mode}")
            if mode == GENERIC:
                plan = await self._generic_plan(sql, len(args))
            else:
                plan = await self._conn.fetchval(f"EXPLAIN (FORMAT JSON) {sql}", *args)
            self.plans.append((mode, sql, json.loads(plan)[0]["Plan"]))

    async def _generic_plan(self, sql: str, arity: int) -> str:
        """The plan the plan cache keeps for ``sql`` without its parameters' values. ``EXPLAIN
        sql`` with parameters is no such plan: the planner sees their values whatever
        ``plan_cache_mode`` says. So the statement is prepared and an execution of it explained,
        with nulls, which the generic plan never looks at."""
        await self._conn.execute(f"PREPARE explained AS {sql}")
        try:
            nulls = f"({', '.join(['NULL'] * arity)})" if arity else ""
            return await self._conn.fetchval(f"EXPLAIN (FORMAT JSON) EXECUTE explained{nulls}")
        finally:
            await self._conn.execute("DEALLOCATE explained")

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


def whole_table_reads(plans: Sequence[tuple[str, str, dict[str, Any]]],
                      tables: set[str]) -> list[str]:
    """Every sequential scan of one of ``tables``, named with its mode and statement, in the
    plans PostgreSQL may run: a generic plan is left out when it costs more than the custom
    plan explained beside it, since the plan cache keeps a generic plan only when it costs no
    more than its custom plans did on average."""
    custom = {sql: plan["Total Cost"] for mode, sql, plan in plans if mode == CUSTOM}
    return [f"{mode}: reads all of {node['Relation Name']}: {sql[:100]}"
            for mode, sql, plan in plans
            if mode != GENERIC or plan["Total Cost"] <= custom.get(sql, plan["Total Cost"])
            for node in nodes(plan)
            if node["Node Type"] == "Seq Scan" and node.get("Relation Name") in tables]


WHOLE_INPUT = {"Sort", "Incremental Sort", "Aggregate", "Hash", "SetOp", "WindowAgg"}
"""Nodes that read all their input before they return a row: a ``Limit`` above them does not
bound what the scans below them read."""


def _unbounded_scans(plan: dict[str, Any], bounded: bool = False) -> Iterator[dict[str, Any]]:
    """The scans of ``plan`` that no ``Limit`` stops early (a scan of an ordered index under a
    ``Limit`` reads as many rows as the limit takes, whatever it expects in all)."""
    bounded = (bounded or plan["Node Type"] == "Limit") and plan["Node Type"] not in WHOLE_INPUT
    if "Relation Name" in plan and not bounded:
        yield plan
    for child in plan.get("Plans", ()):
        yield from _unbounded_scans(child, bounded)


def overestimated_scans(plans: Iterable[tuple[str, str, dict[str, Any]]], tables: set[str],
                        most: int) -> list[str]:
    """Every scan of one of ``tables`` that a custom plan expects to read more than ``most``
    rows of, named with its statement. Plans are chosen by estimates, and a predicate whose
    value the planner cannot see (a column of another row, say) is estimated at a fixed share
    of the table, a third for a range. At a test's tens of thousands of rows that share may
    still be read through an index; on a ledger of a million proposals the same estimate reads
    the table whole. A hot statement's scans must expect the few rows they find. Generic plans
    are left out: they cannot see any parameter, and PostgreSQL keeps a generic plan only when
    it costs no more than the custom ones."""
    return [f"expects {node['Plan Rows']} rows of {node['Relation Name']}: {sql[:100]}"
            for mode, sql, plan in plans if mode == CUSTOM for node in _unbounded_scans(plan)
            if node["Relation Name"] in tables and node["Plan Rows"] > most]


@asynccontextmanager
async def unprepared(database_url: str) -> AsyncIterator[asyncpg.Connection]:
    """A connection of its own, with no statement prepared yet (a pool's may have planned them
    already), inside a transaction that is rolled back as it closes: where ``plans_made``
    counts the plans a statement makes from its first execution on."""
    conn = await asyncpg.connect(database_url)
    try:
        await conn.execute("BEGIN")
        yield conn
    finally:
        await conn.close()


async def plans_made(conn: asyncpg.Connection, *like: str) -> tuple[int, int]:
    """(custom plans, generic plans) made on ``conn`` for the prepared statement whose text
    matches every pattern of ``like`` (SQL ``LIKE``)."""
    where = " AND ".join(f"statement LIKE ${n}" for n in range(1, len(like) + 1))
    row = await conn.fetchrow("SELECT custom_plans, generic_plans FROM pg_prepared_statements"
                              f" WHERE {where}", *like)
    return row["custom_plans"], row["generic_plans"]
