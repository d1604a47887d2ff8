"""A run moved one call at a time (``tally.advance``) is the run ``derive_run`` gives from all
its rows, for any order and any number of copies of its events; and where ``advance`` cannot
tell, it says so rather than guess. The projector relies on both: it reads a run's other calls
only when ``advance`` answers None."""

from __future__ import annotations

import uuid
from collections import defaultdict
from dataclasses import replace
from datetime import timedelta

from hypothesis import given, settings, strategies as st

from services.projection.hashing import run_hash, sealed
from services.projection.reducer import apply, derive_run
from services.projection.routes import read
from services.projection.tally import Tally, advance, tally_of
from tests.support.projection_events import STORIES, Published, RunStory, redelivered


class Projection:
    """The projector's rule, in memory: a run fact or a run without a tally is derived from
    every row; otherwise each changed call advances the run."""

    def __init__(self) -> None:
        self.calls, self.facts, self.seen = {}, defaultdict(list), set()
        self.runs = {}
        self.advanced = self.derived = 0

    def deliver(self, event: Published) -> None:
        if event.envelope.event_id in self.seen:
            return
        self.seen.add(event.envelope.event_id)
        fact = read(event.delivery)
        if fact.run:
            self.facts[fact.run.run_id].append(fact.run)
            self.runs.pop(fact.run.run_id, None)
        if not fact.call:
            return
        before = self.calls.get(fact.call.logical_call_id)
        after, _ = apply(before, fact.call)
        if after == before:
            return
        self.calls[after.logical_call_id] = after
        kept = self.runs.get(after.run_id)
        moved = advance(*kept, before, after) if kept is not None else None
        if moved is None:
            self.derived += 1
            self.runs[after.run_id] = self.from_every_row(after.run_id)
        else:
            self.advanced += 1
            self.runs[after.run_id] = moved

    def from_every_row(self, run_id: str):
        calls = [call for call in self.calls.values() if call.run_id == run_id]
        return derive_run(run_id, calls, self.facts[run_id]), tally_of(calls, self.facts[run_id])


@settings(max_examples=300, deadline=None)
@given(stories=st.lists(st.sampled_from(STORIES), min_size=1, max_size=6),
       seed=st.integers(0, 2**32), copies=st.integers(0, 12))
def test_a_run_advanced_call_by_call_is_the_run_derived_from_every_row(stories, seed, copies):
    _, delivered = redelivered(stories, seed, copies)
    projection = Projection()
    for event in delivered:
        projection.deliver(event)
        for run_id, (run, tally) in projection.runs.items():
            assert (run, tally) == projection.from_every_row(run_id)
            calls = [call for call in projection.calls.values() if call.run_id == run_id]
            assert sealed(run, tally.digest) == run_hash(run, calls)


def test_a_long_run_in_order_is_advanced_never_derived_again():
    """Only a run's first call derives it; the next thousand events move it by their own call."""
    story = RunStory()
    for _ in range(150):
        story.tell("succeeded")
    projection = Projection()
    for event in story.events:
        projection.deliver(event)
    assert projection.derived == 1
    assert projection.advanced > 600
    run, tally = projection.runs[story.run_id]
    assert (run.calls, run.status, tally.unsettled) == (150, "completed", 0)


def test_a_tally_survives_its_round_trip_through_json():
    story = RunStory().tell("refused").tell("unknown").tell("rejected")
    projection = Projection()
    for event in story.events:
        projection.deliver(event)
    _, tally = projection.from_every_row(story.run_id)
    assert tally.refusal is not None and tally.attention == 1
    assert Tally.from_json(tally.to_json()) == tally


STATES = ["VALIDATED", "DISPATCHING", "UNKNOWN", "SUCCEEDED", "DENIED", "FAILED", "EXPIRED"]


def a_call_row():
    """Any row of one run's call: states, times and ids drawn from small sets, so that ties,
    refusals and calls moving back in time (clocks of different hosts) all happen."""
    story = RunStory().tell("succeeded")
    projection = Projection()
    for event in story.events:
        projection.deliver(event)
    template = next(iter(projection.calls.values()))
    base = template.updated_at
    return st.builds(
        lambda state, minutes, event, reason: replace(
            template, state=state, updated_at=base + timedelta(minutes=minutes),
            last_event_id=uuid.UUID(int=event), reason=reason),
        st.sampled_from(STATES), st.integers(0, 3), st.integers(1, 6),
        st.sampled_from([None, "no_rule_matched", "rejected_by_tool"]))


def own(row, n: int):
    """The row as the ``n``-th call's: an event concerns one call, so no two calls share one."""
    return replace(row, logical_call_id=uuid.UUID(int=1000 + n),
                   last_event_id=uuid.UUID(int=row.last_event_id.int * 1000 + n))


@settings(max_examples=500, deadline=None)
@given(rows=st.lists(a_call_row(), min_size=1, max_size=6), changed=st.data())
def test_advance_answers_what_every_row_gives_or_nothing_for_any_rows(rows, changed):
    """Arbitrary rows, including changes no story makes: ``advance`` is never wrong."""
    calls = [own(row, n) for n, row in enumerate(rows)]
    index = changed.draw(st.integers(0, len(calls)), label="which call changes (len: a new one)")
    after = own(changed.draw(a_call_row(), label="its new row"), index)
    before = calls[index] if index < len(calls) else None
    was = derive_run(after.run_id, calls, []), tally_of(calls, [])
    now_calls = [after if call.logical_call_id == after.logical_call_id else call for call in calls]
    if before is None:
        now_calls.append(after)
    moved = advance(*was, before, after)
    if moved is not None:
        assert moved == (derive_run(after.run_id, now_calls, []), tally_of(now_calls, []))
