"""Runs an operator cancelled, as the policy keeps them (``policy.cancelled_runs``).

The dispatcher stops a cancelled run and refuses its calls whatever the policy decided. The
policy's part is to stop asking people: a call of the run waiting for approval is denied
``run_cancelled`` when the cancellation arrives, and a later call that would need approval is
denied at once. A cancellation and a decision that would ask for approval take the run's
advisory lock, so neither can miss the other: a request committed just before the
cancellation is found by it, and a decision made after it finds the run cancelled.
"""

from __future__ import annotations

from collections.abc import Iterable

import asyncpg

from services.policy.repository import SCHEMA
from shared.contracts.cancellations import RunCancellation
from shared.runs import RunKey, run_name_sql


async def lock_runs(conn: asyncpg.Connection, runs: Iterable[RunKey]) -> None:
    """In sorted order, so two holders of several runs' locks cannot deadlock."""
    ordered = sorted(set(runs))
    await conn.execute(
        "SELECT pg_advisory_xact_lock(hashtextextended('intentledger.policy.run:' || "
        f"{run_name_sql('r.tenant_id', 'r.run_id')}, 0))"
        " FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS r(tenant_id, run_id, n)"
        " ORDER BY r.n", [run.tenant_id for run in ordered], [run.run_id for run in ordered])


async def record(conn: asyncpg.Connection, cancellation: RunCancellation, event_id) -> None:
    """The first cancellation of a run is the one kept."""
    await conn.execute(
        f"INSERT INTO {SCHEMA}.cancelled_runs (tenant_id, run_id, event_id, operator_id, reason)"
        " VALUES ($1, $2, $3, $4, $5) ON CONFLICT (tenant_id, run_id) DO NOTHING",
        cancellation.tenant_id, cancellation.run_id, event_id, cancellation.operator_id,
        cancellation.reason)


async def cancelled(conn: asyncpg.Connection, runs: Iterable[RunKey]) -> dict[RunKey, str]:
    """Which of ``runs`` were cancelled, each with who cancelled it and why."""
    wanted = sorted(set(runs))
    rows = await conn.fetch(
        f"SELECT c.tenant_id, c.run_id, c.operator_id, c.reason FROM {SCHEMA}.cancelled_runs c"
        " JOIN unnest($1::text[], $2::text[]) AS r(tenant_id, run_id)"
        " ON c.tenant_id = r.tenant_id AND c.run_id = r.run_id",
        [run.tenant_id for run in wanted], [run.run_id for run in wanted])
    return {RunKey.of(row): cancelled_by(row["operator_id"], row["reason"]) for row in rows}


def cancelled_by(operator_id: str, reason: str) -> str:
    return f"the run was cancelled by {operator_id}: {reason}"
