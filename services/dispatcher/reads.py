"""What a batch's steps read once their leases are held: the runs (locked), each call's
attempts, its oldest resolution not yet concluded (locked), and the bounded tools' slots, in one
statement.

Each is defined where its table is (``repository.runs_locked``, ``attempts.ATTEMPTS``,
``resolutions.PENDING``, ``capacity.SLOTS``); asked for together they cost the consumer's and
the scheduler's transactions one round trip instead of four. The runs come first: they are
locked before the resolutions, in run order, as every batch locks them. At 10 proposals/s a
round trip inside a dispatcher transaction is a few tenths of a millisecond of the proposal's
latency, most of it the wake-ups of two processes, not PostgreSQL's work (bench/README.md,
"Where a proposal's milliseconds go at 10/s").
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

import asyncpg

from services.dispatcher import attempts, capacity, repository as repo, resolutions
from services.dispatcher.capacity import Capacity
from services.dispatcher.repository import Attempt, Run
from shared.runs import RunKey


@dataclass(frozen=True)
class StepReads:
    runs: dict[RunKey, Run]
    attempts: dict[uuid.UUID, list[Attempt]]
    """Every call's, in order (a call without any has an empty list)."""
    pending: dict[uuid.UUID, tuple[uuid.UUID, dict[str, Any]]]
    """Each call's oldest resolution not yet concluded: (event id, request)."""
    slots: Capacity


async def step_reads(conn: asyncpg.Connection, runs: list[RunKey], call_ids: list[uuid.UUID],
                     bounds: dict[str, int]) -> StepReads:
    """``runs`` locked, the calls' attempts and oldest pending resolutions, and the slots of
    the tools in ``bounds`` (none asked for when it is empty)."""
    row = await conn.fetchrow(
        f"SELECT {repo.runs_locked('$3', '$4')} AS runs, {attempts.ATTEMPTS} AS attempts,"
        f" {resolutions.PENDING} AS pending, {capacity.SLOTS} AS slots", call_ids, list(bounds),
        [run.tenant_id for run in runs], [run.run_id for run in runs])
    return StepReads(repo.runs_from(row["runs"]), attempts.attempts_from(row["attempts"], call_ids),
                     resolutions.oldest_pending(row["pending"]),
                     capacity.capacity_from(bounds, row["slots"]))
