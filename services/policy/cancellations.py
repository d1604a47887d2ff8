"""Runs an operator cancelled, as the policy keeps them (``policy.cancelled_runs``).

The dispatcher stops a cancelled run and refuses its calls whatever the policy decided. The
policy's part is to stop asking people: a call of the run waiting for approval is denied
``run_cancelled`` when the cancellation arrives, and a later call that would need approval is
denied at once. A cancellation and a decision that would ask for approval take the run's
advisory lock, so neither can miss the other: a request committed just before the
cancellation is found by it, and a decision made after it finds the run cancelled.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

import asyncpg

from services.policy.repository import SCHEMA, lock_keys
from shared.contracts.cancellations import RunCancellation
from shared.runs import RunKey


async def lock_runs(conn: asyncpg.Connection, runs: Iterable[RunKey]) -> None:
    """Each run named as a JSON array, so no separator in an id can make two runs one key."""
    await lock_keys(conn, "run", (json.dumps([run.tenant_id, run.run_id]) for run in runs))


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
