"""Applying ledger events to a projection schema, inside the caller's transaction: append them
to the history, fold them into their calls with the reducer, re-derive their runs and each
run's projection hash. The live consumer and the replay both call ``project``; only the
consumer announces settled calls."""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence

import asyncpg

from services.projection import repository as repo
from services.projection.facts import Delivery
from services.projection.routes import read
from services.projection.hashing import run_hash
from services.projection.reducer import REDUCER_VERSION, CallRow, announced, apply, derive_run
from shared.errors import PermanentError
from shared.messaging.envelope import Envelope
from shared.messaging.versioning import Advance
from shared.runs import RunKey

Announce = Callable[[CallRow, Envelope], None]
"""Told the call's row and the event that settled it."""


async def project(conn: asyncpg.Connection, schema: str, deliveries: Sequence[Delivery],
                  announce: Announce | None = None) -> int:
    """Returns how many events were new to the history (the others change nothing)."""
    facts = [read(delivery) for delivery in deliveries]
    fresh = await repo.append(conn, schema, facts)
    facts = [fact for fact in facts if fact.envelope.event_id in fresh]
    runs = sorted({fact.run_key for fact in facts if fact.call or fact.run})
    if not runs:
        return len(facts)
    calls = await repo.calls_of(conn, schema, runs, [fact.call.logical_call_id
                                                     for fact in facts if fact.call])
    changed: dict[uuid.UUID, CallRow] = {}
    for fact in (fact for fact in facts if fact.call):
        before = calls.get(fact.call.logical_call_id)
        after, advance = apply(before, fact.call)
        if advance is Advance.ILLEGAL:
            raise PermanentError(f"{fact.envelope.event_type} {fact.envelope.event_id} contradicts "
                                 f"the identity of call {fact.call.logical_call_id}")
        if after != before:
            calls[fact.call.logical_call_id] = changed[fact.call.logical_call_id] = after
        if announce and (state := announced(after)) and state != announced(before):
            announce(after, fact.envelope)
    calls |= await repo.upsert_calls(conn, schema, changed.values())
    await _derive_runs(conn, schema, runs, calls.values())
    return len(facts)


async def _derive_runs(conn: asyncpg.Connection, schema: str, runs: list[RunKey],
                       calls: Iterable[CallRow]) -> None:
    """From the calls as stored (as upserting returned them), so each run's hash is over
    exactly what a reader sees."""
    of_run: dict[RunKey, list[CallRow]] = defaultdict(list)
    for call in calls:
        of_run[RunKey.of(call)].append(call)
    facts = await repo.run_facts(conn, schema, runs)
    derived = []
    for key in runs:
        run = derive_run(key.run_id, of_run[key], facts.get(key, []))
        if run is not None:
            derived.append((run, run_hash(run, of_run[key]), REDUCER_VERSION))
    await repo.upsert_runs(conn, schema, derived)
