"""A run's tally: what the projection keeps beside a run's row so that an event moves the run
without reading the run's other calls.

``derive_run`` computes a run from all of its calls and run facts; an event of a run of a
thousand calls would then read and hash a thousand rows, and a run's events would cost the
square of its length. The tally holds what the run's columns are totals of — how many calls are
unsettled or need attention, the first call (whose principal the run shows), the latest refusal
(its stop reason), whether it was aborted, the digest of its call rows — so ``advance`` moves
the run by one call's old and new row. Where a total cannot be moved from that alone (the
latest time of the run moved backwards, the refusal it names is no longer one) ``advance``
answers None and the projector derives the run from all its rows, as it does for a run with a
run fact in the batch (an abort, a refused proposal) and for a run stored before tallies
existed. Either way the row is the one ``derive_run`` gives (tests/unit/projection/
test_tally.py checks it for any order and batching of the events).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from services.projection.facts import RunFact
from services.projection.hashing import MODULUS, call_digest, calls_digest, scalar
from services.projection.reducer import (NEEDS_ATTENTION, SETTLED, CallRow, Refusal, RunRow,
                                         latest_refusal, refusal_of, run_status)


@dataclass(frozen=True)
class Tally:
    digest: int
    """Of the run's call rows (``hashing.calls_digest``)."""
    unsettled: int
    attention: int
    aborted: bool
    first_call: uuid.UUID
    refusal: Refusal | None

    def to_json(self) -> dict[str, Any]:
        refusal = self.refusal
        return {"digest": f"{self.digest:064x}", "unsettled": self.unsettled,
                "attention": self.attention, "aborted": self.aborted,
                "first_call": str(self.first_call),
                "refusal": None if refusal is None else [scalar(refusal.at),
                                                         str(refusal.event_id), refusal.reason]}

    @classmethod
    def from_json(cls, stored: dict[str, Any]) -> Tally:
        refusal = stored["refusal"]
        return cls(int(stored["digest"], 16), stored["unsettled"], stored["attention"],
                   stored["aborted"], uuid.UUID(stored["first_call"]),
                   None if refusal is None else Refusal(datetime.fromisoformat(refusal[0]),
                                                        uuid.UUID(refusal[1]), refusal[2]))


def tally_of(calls: Iterable[CallRow], facts: Iterable[RunFact]) -> Tally:
    """From every row of the run (at least one call)."""
    calls, facts = list(calls), list(facts)
    return Tally(digest=calls_digest(calls),
                 unsettled=sum(map(_unsettled, calls)),
                 attention=sum(map(_needs_attention, calls)),
                 aborted=any(fact.kind == "aborted" for fact in facts),
                 first_call=min(call.logical_call_id for call in calls),
                 refusal=latest_refusal(calls, facts))


def advance(run: RunRow, tally: Tally, before: CallRow | None,
            after: CallRow) -> tuple[RunRow, Tally] | None:
    """The run and its tally once one of its calls went from ``before`` (None: new) to
    ``after``; None when that cannot be told without the run's other rows."""
    try:
        updated_at = _next_update(run.updated_at, before, after)
        refusal = _next_refusal(tally.refusal, refusal_of(before), refusal_of(after))
    except _NeedsEveryRow:
        return None
    digest = tally.digest + call_digest(after)
    if before is not None:
        digest -= call_digest(before)
    tally = Tally(
        digest=digest % MODULUS,
        unsettled=tally.unsettled + _unsettled(after) - _unsettled(before),
        attention=tally.attention + _needs_attention(after) - _needs_attention(before),
        aborted=tally.aborted,
        first_call=min(tally.first_call, after.logical_call_id),
        refusal=refusal)
    principal = after.principal_id if tally.first_call == after.logical_call_id else run.principal_id
    return replace(run, principal_id=principal,
                   status=run_status(tally.attention > 0, tally.aborted, tally.unsettled > 0),
                   calls=run.calls + (before is None),
                   stop_reason=run.stop_reason if tally.aborted else (
                       refusal.reason if refusal is not None else None),
                   updated_at=updated_at), tally


class _NeedsEveryRow(Exception):
    """A total that one call's change cannot move."""


def _next_update(latest: datetime, before: CallRow | None, after: CallRow) -> datetime:
    if after.updated_at >= latest:
        return after.updated_at
    if before is not None and before.updated_at == latest:
        raise _NeedsEveryRow  # the latest call moved back in time: which one is latest now?
    return latest


def _next_refusal(latest: Refusal | None, was: Refusal | None,
                  now: Refusal | None) -> Refusal | None:
    """The run's latest refusal once one call's went from ``was`` to ``now``."""
    if was == now:
        return latest
    if was is not None and latest is not None and was.key == latest.key:
        if now is not None and now.key > was.key:
            return now
        raise _NeedsEveryRow  # the latest refusal went: the next latest is another row's
    if now is not None and (latest is None or now.key > latest.key):
        return now
    return latest


def _unsettled(call: CallRow | None) -> int:
    return int(call is not None and call.state not in SETTLED)


def _needs_attention(call: CallRow | None) -> int:
    return int(call is not None and call.state in NEEDS_ATTENTION)
