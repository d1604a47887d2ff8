"""Replay (docs/design.md §5 invariant 3): rebuild the read models from the event history alone, into
a scratch schema, with the same reducer; compare per-run projection hashes with the live rows.

The live rows and the history are read in one repeatable-read snapshot, so events the live
consumer applies meanwhile are in neither. Verification also recomputes each live run's hash
from its rows, as the reducer version that stored it computes it, and compares it with the hash
stored on the run: a row changed by hand since shows up even when the replay agrees with the
history.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterable, AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import asyncpg
from pydantic import ValidationError

from services.projection import repository as repo
from services.projection.facts import Delivery
from services.projection.hashing import RUN_HASHES, overall_hash, record, run_hash
from services.projection.projector import project
from services.projection.reducer import REDUCER_VERSION, CallRow, RunRow
from shared.db.migrations import load
from shared.errors import PermanentError
from shared.messaging.envelope import Envelope
from shared.runs import RunKey

MIGRATIONS = Path(__file__).with_name("migrations")
BATCH = 500


@dataclass(frozen=True)
class Snapshot:
    """Runs with their calls, and the hash and reducer version stored on each run's row."""

    runs: dict[RunKey, RunRow]
    calls: dict[RunKey, list[CallRow]]
    stored: dict[RunKey, tuple[str, str]]

    def hashes(self) -> dict[RunKey, str]:
        return {key: run_hash(run, self.calls.get(key, [])) for key, run in self.runs.items()}


@dataclass(frozen=True)
class Verdict:
    reducer_version: str
    events: int
    runs: int
    live_hash: str
    replayed_hash: str
    difference: str | None
    """The first differing record, for a person; None when live and replay agree."""

    @property
    def agrees(self) -> bool:
        return self.difference is None


async def replay(pool: asyncpg.Pool, run_ids: Sequence[str] | None = None) -> Verdict:
    """Rebuild ``run_ids`` (every run when None) from the live history and compare."""
    async with pool.acquire() as conn, conn.transaction(isolation="repeatable_read", readonly=True):
        live = await snapshot(conn, repo.SCHEMA, run_ids)
        scratch = await create_scratch(pool)
        try:
            events = await rebuild(pool, scratch, read_history(conn, run_ids))
            async with pool.acquire() as scratch_conn:
                replayed = await snapshot(scratch_conn, scratch, run_ids)
        except PermanentError as unreadable:  # a history row written by hand, or corrupted
            return Verdict(REDUCER_VERSION, 0, 0, overall_hash(live.hashes()), "(none)",
                           f"the history cannot be replayed: {unreadable}")
        finally:
            await drop_scratch(pool, scratch)
    return verdict(live, replayed, events)


def verdict(live: Snapshot, replayed: Snapshot, events: int) -> Verdict:
    return Verdict(REDUCER_VERSION, events, len(replayed.runs), overall_hash(live.hashes()),
                   overall_hash(replayed.hashes()), first_difference(live, replayed))


async def read_history(conn: asyncpg.Connection, run_ids: Sequence[str] | None
                       ) -> AsyncIterator[Delivery]:
    """The live history in position order (the caller holds the transaction)."""
    query = (f'SELECT position, topic, envelope FROM "{repo.SCHEMA}".events'
             " WHERE $1::text[] IS NULL OR run_id = ANY($1::text[]) ORDER BY position")
    async for row in conn.cursor(query, None if run_ids is None else list(run_ids),
                                 prefetch=BATCH):
        try:
            yield Delivery(row["topic"], Envelope.model_validate_json(row["envelope"]))
        except ValidationError as error:
            raise PermanentError(f"history position {row['position']} is not an event "
                                 f"envelope: {error.errors()[0]['msg']}") from error


async def rebuild(pool: asyncpg.Pool, scratch: str, source: AsyncIterable[Delivery]) -> int:
    """Feed the events through the live code path into ``scratch``; returns how many."""
    count, batch = 0, []
    async for delivery in source:
        batch.append(delivery)
        if len(batch) == BATCH:
            count += await _apply(pool, scratch, batch)
            batch = []
    return count + (await _apply(pool, scratch, batch) if batch else 0)


async def snapshot(conn: asyncpg.Connection, schema: str,
                   run_ids: Sequence[str] | None) -> Snapshot:
    stored = await repo.stored_runs(conn, schema, run_ids)
    calls = await repo.calls_of_runs(conn, schema, list(stored))
    return Snapshot(runs={key: run for key, (run, _, _) in stored.items()}, calls=dict(calls),
                    stored={key: (digest, version) for key, (_, digest, version)
                            in stored.items()})


def first_difference(live: Snapshot, replayed: Snapshot) -> str | None:
    """Runs in (tenant, id) order; within a run its row, then its calls in id order."""
    for run_id in sorted(live.runs.keys() | replayed.runs.keys()):
        mine, theirs = live.runs.get(run_id), replayed.runs.get(run_id)
        if mine is None or theirs is None:
            where = "the replay" if mine is None else "the live projection"
            return f"run {run_id} exists only in {where}"
        if record(mine) != record(theirs):
            return f"run {run_id}\n  live:     {record(mine)}\n  replayed: {record(theirs)}"
        calls = _by_id(live.calls.get(run_id, [])), _by_id(replayed.calls.get(run_id, []))
        for call_id in sorted(calls[0].keys() | calls[1].keys()):
            rows = [record(side[call_id]) if call_id in side else "(absent)" for side in calls]
            if rows[0] != rows[1]:
                return (f"call {call_id} of run {run_id}\n  live:     {rows[0]}\n"
                        f"  replayed: {rows[1]}")
        digest, version = live.stored[run_id]
        if (hasher := RUN_HASHES.get(version)) is None:
            return f"run {run_id}: hashed by reducer {version}, which this version does not know"
        if digest != (computed := hasher(mine, live.calls.get(run_id, []))):
            return (f"run {run_id}: its stored projection_hash {digest} (reducer {version}) is not "
                    f"the hash of its rows now, {computed}")
    return None


async def create_scratch(pool: asyncpg.Pool) -> str:
    """The projection's own tables only: no outbox, so no relay ever publishes from it."""
    scratch = f"projection_replay_{uuid.uuid4().hex[:12]}"
    async with pool.acquire() as conn, conn.transaction():
        await conn.execute(f'CREATE SCHEMA "{scratch}"')
        await conn.execute(f'SET LOCAL search_path TO "{scratch}"')
        for migration in load("service", MIGRATIONS):
            await conn.execute(migration.sql)
    return scratch


async def drop_scratch(pool: asyncpg.Pool, scratch: str) -> None:
    async with pool.acquire() as conn:
        await conn.execute(f'DROP SCHEMA "{scratch}" CASCADE')


async def _apply(pool: asyncpg.Pool, scratch: str, batch: list[Delivery]) -> int:
    async with pool.acquire() as conn, conn.transaction():
        return len(await project(conn, scratch, batch))


def _by_id(calls: list[CallRow]) -> dict[uuid.UUID, CallRow]:
    return {call.logical_call_id: call for call in calls}
