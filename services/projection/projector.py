"""Applying ledger events to a projection schema, inside the caller's transaction: append them
to the history, fold them into their calls with the reducer, move their runs and each run's
projection hash. The live consumer and the replay both call ``project``. It tells agents
nothing: each service announces what it decides, in the transaction that decides it (the
intake, the policy, the dispatcher), so the read model is never on an agent's path.

A batch reads only its own calls and its runs' rows: each run moves by the calls that changed
(``tally.py``), so an event costs the same in a run of ten calls as in a run of ten thousand. A
run is derived from all its rows instead when a batch brings it a run fact, when one change
cannot move its totals, and the first time this reducer version meets it."""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Sequence

import asyncpg

from services.projection import repository as repo
from services.projection.facts import Delivery
from services.projection.routes import read
from services.projection.reducer import CallRow, RunRow, apply, derive_run
from services.projection.tally import Tally, advance, tally_of
from shared.errors import PermanentError
from shared.messaging.versioning import Advance
from shared.runs import RunKey

Change = tuple[CallRow | None, CallRow]
"""A call's row before the batch (None: new) and as stored after it."""


async def project(conn: asyncpg.Connection, schema: str,
                  deliveries: Sequence[Delivery]) -> set[uuid.UUID]:
    """Returns the ids of the events new to the history (the others change nothing): the
    history, keyed by event id and kept for ever, is the consumer's inbox."""
    facts = [read(delivery) for delivery in deliveries]
    fresh = await repo.append(conn, schema, facts)
    facts = [fact for fact in facts if fact.envelope.event_id in fresh]
    runs = sorted({fact.run_key for fact in facts if fact.call or fact.run})
    if not runs:
        return fresh
    stored = await repo.calls_by_id(conn, schema, {fact.call.logical_call_id
                                                    for fact in facts if fact.call})
    calls, changed = dict(stored), {}
    for fact in (fact for fact in facts if fact.call):
        before = calls.get(fact.call.logical_call_id)
        after, advanced = apply(before, fact.call)
        if advanced is Advance.ILLEGAL:
            raise PermanentError(f"{fact.envelope.event_type} {fact.envelope.event_id} contradicts "
                                 f"the identity of call {fact.call.logical_call_id}")
        if after != before:
            calls[fact.call.logical_call_id] = changed[fact.call.logical_call_id] = after
    upserted = await repo.upsert_calls(conn, schema, changed.values())
    changes: dict[RunKey, list[Change]] = defaultdict(list)
    for call_id, after in upserted.items():
        changes[RunKey.of(after)].append((stored.get(call_id), after))
    with_facts = {fact.run_key for fact in facts if fact.run}
    await _move_runs(conn, schema, runs, changes, with_facts)
    return fresh


async def _move_runs(conn: asyncpg.Connection, schema: str, runs: list[RunKey],
                     changes: dict[RunKey, list[Change]], with_facts: set[RunKey]) -> None:
    """Each run advanced by its calls' changes, or derived from all its rows (as stored, so
    its hash is over exactly what a reader sees)."""
    kept = await repo.runs_to_advance(conn, schema, [run for run in runs if run not in with_facts])
    moved: list[tuple[RunRow, Tally]] = []
    derive = []
    for key in runs:
        step = kept.get(key)
        for before, after in changes.get(key, []):
            if step is None:
                break
            step = advance(*step, before, after)
        if step is None:
            derive.append(key)
        elif changes.get(key):
            moved.append(step)
    if derive:
        calls = await repo.calls_of_runs(conn, schema, derive)
        facts = await repo.run_facts(conn, schema, derive)
        for key in derive:
            run = derive_run(key.run_id, calls[key], facts.get(key, []))
            if run is not None:
                moved.append((run, tally_of(calls[key], facts.get(key, []))))
    await repo.upsert_runs(conn, schema, moved)
