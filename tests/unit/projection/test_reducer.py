"""The reducer gives the same rows for the same set of events, whatever their order and however
often each arrives; it never goes backwards; and a run's status says what an operator needs."""

from __future__ import annotations

import random
import uuid
from collections import defaultdict
from dataclasses import replace

import pytest
from hypothesis import given, settings, strategies as st

from services.projection.facts import Delivery
from services.projection.routes import read
from services.projection.hashing import record, run_hash
from services.projection.reducer import apply, derive_run
from shared.contracts.dispatch import TOOL_EFFECT_RECONCILED, TOOL_ATTEMPT_STARTED
from shared.errors import PermanentError
from shared.messaging.versioning import Advance
from tests.support.projection_events import (STORIES, Published, RunStory, expected_status,
                                             mixed_runs, redelivered)


def fold(events: list[Published]):
    """The reducer alone, in memory: each event id applied once, in the order given."""
    calls, facts, seen = {}, defaultdict(list), set()
    for event in events:
        if event.envelope.event_id in seen:
            continue
        seen.add(event.envelope.event_id)
        fact = read(Delivery(event.role, event.envelope))
        if fact.call:
            calls[fact.call.logical_call_id], _ = apply(calls.get(fact.call.logical_call_id),
                                                        fact.call)
        if fact.run:
            facts[fact.run.run_id].append(fact.run)
    runs = {}
    for run_id in {call.run_id for call in calls.values()}:
        of_run = [call for call in calls.values() if call.run_id == run_id]
        runs[run_id] = derive_run(run_id, of_run, facts[run_id])
    return calls, runs


def rows(events: list[Published]) -> dict[str, tuple[str, list[str]]]:
    calls, runs = fold(events)
    return {run_id: (record(run), sorted(record(c) for c in calls.values() if c.run_id == run_id))
            for run_id, run in runs.items()}


@settings(max_examples=150, deadline=None)
@given(stories=st.lists(st.sampled_from(STORIES), min_size=1, max_size=4),
       seed=st.integers(0, 2**32), copies=st.integers(0, 12))
def test_the_same_events_in_any_order_and_any_number_of_copies_give_the_same_rows(
        stories, seed, copies):
    story, delivered = redelivered(stories, seed, copies)
    assert rows(delivered) == rows(story.events)


def test_a_thousand_runs_give_the_same_rows_forwards_backwards_and_shuffled():
    events = [event for story, _ in mixed_runs(1000) for event in story.events]
    shuffled = random.Random(3).sample(events, len(events))
    assert rows(events) == rows(list(reversed(events))) == rows(shuffled)


def test_each_story_gives_the_run_status_an_operator_expects():
    for story, names in mixed_runs(300, seed=11):
        _, runs = fold(story.events)
        assert runs[story.run_id].status == expected_status(names), names


def test_a_run_with_an_unknown_call_is_not_completed_until_it_is_reconciled():
    story = RunStory()
    story.succeeded()
    stuck = story.unknown()
    _, runs = fold(story.events)
    assert runs[story.run_id].status == "needs_attention"
    story.step(stuck, TOOL_ATTEMPT_STARTED, "RECONCILING", attempt=2, kind="lookup", fence=2)
    _, runs = fold(story.events)
    assert runs[story.run_id].status == "running"
    story.step(stuck, TOOL_EFFECT_RECONCILED, "SUCCEEDED", attempt=2, kind="lookup", fence=2,
               receipt_id="r-1", result={"debit_id": "d-1"})
    calls, runs = fold(story.events)
    assert runs[story.run_id].status == "completed"
    row = calls[uuid.UUID(stuck.id)]
    assert (row.state, row.version, row.attempts, row.fence, row.receipt_id) == (
        "SUCCEEDED", 6, 2, 2, "r-1")


def test_a_stale_event_moves_nothing_but_still_fills_the_calls_identity():
    story = RunStory()
    call = story.reconciled()
    accepted, *_, last = [e for e in story.events if e.role != "effects"]
    calls, _ = fold([last, accepted])
    row = calls[uuid.UUID(call.id)]
    assert (row.state, row.stage, row.version, row.last_event_id) == (
        "SUCCEEDED", 3, 6, last.envelope.event_id)
    assert (row.provider_call_id, row.arguments_hash) == (
        call.intent["provider_call_id"], call.intent["arguments_hash"])
    assert row.updated_at == last.envelope.occurred_at  # event time, never the clock


def test_the_policys_allow_outranks_its_approval_request_in_either_order():
    story = RunStory()
    call = story.awaiting()
    story.allow(call)
    for order in (story.events, list(reversed(story.events))):
        calls, _ = fold(order)
        assert calls[uuid.UUID(call.id)].state == "AUTHORIZED"


def test_unknown_since_is_when_the_call_was_last_marked_unknown():
    story = RunStory()
    call = story.unknown()
    marked = story.events[-1].envelope.occurred_at
    story.step(call, TOOL_ATTEMPT_STARTED, "RECONCILING", attempt=2, kind="lookup", fence=2)
    calls, _ = fold(list(reversed(story.events)))
    assert calls[uuid.UUID(call.id)].unknown_since == marked


def test_an_event_that_contradicts_a_calls_identity_is_illegal():
    story = RunStory()
    call = story.succeeded()
    facts = [read(Delivery(e.role, e.envelope)).call for e in story.events if e.role != "effects"]
    row, _ = apply(None, facts[0])
    forged = replace(facts[-1], tenant_id="globex")
    assert apply(row, forged) == (row, Advance.ILLEGAL)
    assert call.id == str(row.logical_call_id)


def test_an_aborted_run_names_its_stop_reason_and_counts_refused_proposals():
    story = RunStory()
    story.rejected()
    story.refused()
    _, runs = fold(story.events)
    run = runs[story.run_id]
    assert (run.status, run.stop_reason, run.rejected_proposals, run.calls) == (
        "aborted", "capability_expired", 1, 2)


def test_the_run_hash_depends_on_the_rows_not_on_their_order():
    story = RunStory().tell("saga")
    calls, runs = fold(story.events)
    run = runs[story.run_id]
    listed = list(calls.values())
    assert run_hash(run, listed) == run_hash(run, list(reversed(listed)))
    assert run_hash(run, listed) != run_hash(replace(run, status="completed"), listed)


def test_an_event_type_the_projection_does_not_know_is_refused_not_skipped():
    story = RunStory()
    story.succeeded()
    unknown = story.events[0].envelope.model_copy(update={"event_type": "ProposalTeleported"})
    with pytest.raises(PermanentError, match="ProposalTeleported"):
        read(Delivery("ledger.intake", unknown))


def test_a_compensation_the_policy_authorized_has_no_agents_call_to_pair_with():
    """Its authorization carries the dispatcher's intent (provider call id
    ``compensation:…``), but no agent proposed it: the row names what it compensates and has
    no provider call id."""
    story = RunStory()
    debit = story.saga()
    calls, _ = fold(story.events)
    [refund] = [row for row in calls.values() if row.compensates is not None]
    assert str(refund.compensates) == debit.id and refund.state == "SUCCEEDED"
    assert refund.provider_call_id is None
    assert calls[uuid.UUID(debit.id)].state == "COMPENSATED"
