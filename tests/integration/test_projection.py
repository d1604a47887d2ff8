"""The projection on real Kafka and PostgreSQL: the read models depend on the set of ledger events
only — not on their order across or within topics, not on duplicates, not on a crash between
applying and committing — and a replay of the history rebuilds them to the same hash
(docs/design.md §5 invariant 3). Each test publishes its own runs to its own topics and asserts per
run: the ``projection`` schema is shared."""

from __future__ import annotations

import os
import random
import subprocess
import sys
import time

import pytest

from services.projection.replay import first_difference, replay
from shared.db.schemas import migrate_service
from shared import faults
from shared.contracts.dispatch import TOOL_ATTEMPT_STARTED, TOOL_EFFECT_RECONCILED
from shared.faults import EXIT_CODE
from tests.support.kafka import create_topic
from tests.support.processes import ServiceProcess
from tests.support.projection_events import STORIES, RunStory, expected_status, mixed_runs
from tests.support.projection_stage import (LedgerTopics, applied, caught_up,
                                            clean, group_members, live, projecting, publish,
                                            run_status, stored_as_sent, written)

pytestmark = pytest.mark.infra


@pytest.fixture
async def topics(pool, endpoints) -> LedgerTopics:
    await migrate_service(pool, "projection")
    topics = LedgerTopics()
    await topics.create(endpoints.kafka_bootstrap)
    return topics


async def test_duplicate_and_out_of_order_delivery_leave_the_read_models_of_a_clean_run(
        pool, endpoints, topics):
    stories = [RunStory().tell(name) for name in STORIES] + [s for s, _ in mixed_runs(20, seed=5)]
    run_ids = [story.run_id for story in stories]
    rng = random.Random(9)
    sent = []
    for index, story in enumerate(stories):  # each run: as produced, reversed, or shuffled
        events = list(story.events)
        sent += (events, events[::-1], rng.sample(events, len(events)))[index % 3]
    every = [event for story in stories for event in story.events]
    async with projecting(endpoints, topics) as run:
        await publish(endpoints.kafka_bootstrap, topics, sent)
        await publish(endpoints.kafka_bootstrap, topics, rng.sample(sent, len(sent)))  # again
        assert await applied(pool, every)
        assert await caught_up(endpoints.kafka_bootstrap, topics)
    assert run.totals.duplicates == len(every) and not run.totals.dead_lettered
    projected = await live(pool, run_ids)
    reference = await clean(pool, topics.deliveries(every), run_ids)
    assert first_difference(projected, reference) is None
    assert projected.hashes() == reference.hashes()
    stored = {run_id: digest for run_id, (digest, _) in projected.stored.items()}
    assert stored == projected.hashes()
    for story, name in zip(stories, STORIES, strict=False):
        assert projected.runs[story.key].status == expected_status([name]), name
    assert await written(pool, run_ids) == 0
    assert await stored_as_sent(pool, every) == len(every)


async def test_a_run_with_an_unknown_call_is_not_completed_until_reconciled(
        pool, endpoints, topics):
    story = RunStory()
    story.succeeded()
    stuck = story.unknown()
    async with projecting(endpoints, topics):
        await publish(endpoints.kafka_bootstrap, topics, story.events)
        assert await applied(pool, story.events)
        assert await run_status(pool, story.run_id) == "needs_attention"
        before = len(story.events)
        story.step(stuck, TOOL_ATTEMPT_STARTED, "RECONCILING", attempt=2, kind="lookup", fence=2)
        story.step(stuck, TOOL_EFFECT_RECONCILED, "SUCCEEDED", attempt=2, kind="lookup", fence=2,
                   receipt_id="r-9", result={"debit_id": "d-9", "balance_minor": 2000})
        await publish(endpoints.kafka_bootstrap, topics, story.events[before:][::-1])
        assert await applied(pool, story.events)
    call = next(c for c in (await live(pool, [story.run_id])).calls[story.key]
                if str(c.logical_call_id) == stuck.id)
    assert (call.state, call.attempts, call.fence, call.receipt_id) == ("SUCCEEDED", 2, 2, "r-9")
    assert call.unknown_since is not None  # the evidence that it once was unknown stays
    assert await run_status(pool, story.run_id) == "completed"
    assert await written(pool, [story.run_id]) == 0


async def test_a_crash_after_apply_before_commit_then_a_restart_gives_the_clean_hash(
        pool, endpoints, topics, tmp_path):
    stories = [story for story, _ in mixed_runs(30, seed=13)]
    run_ids = [story.run_id for story in stories]
    every = [event for story in stories for event in story.events]
    await publish(endpoints.kafka_bootstrap, topics, every)
    crashing = ServiceProcess("projection", endpoints, tmp_path / "crash.log",
                              faults="projection.after_apply_before_commit=exit@1",
                              env=topics.env()).start()
    assert crashing.wait_exit(120) == EXIT_CODE
    assert await pool.fetchval("SELECT count(*) FROM projection.events WHERE run_id = ANY($1)",
                               run_ids) == 0  # nothing of the batch was committed
    restarted = ServiceProcess("projection", endpoints, tmp_path / "restart.log",
                               env=topics.env()).start()
    try:
        assert await applied(pool, every, timeout=180)
    finally:
        assert restarted.stop() == 0
    projected = await live(pool, run_ids)
    reference = await clean(pool, topics.deliveries(every), run_ids)
    assert first_difference(projected, reference) is None
    assert projected.hashes() == reference.hashes()
    assert await written(pool, run_ids) == 0


async def test_a_commit_lost_at_the_crash_point_applies_the_batch_again_and_once(
        pool, endpoints, topics, caplog):
    stories = [story for story, _ in mixed_runs(10, seed=23)]
    run_ids = [story.run_id for story in stories]
    every = [event for story in stories for event in story.events]
    faults.configure("projection.after_apply_before_commit=drop@1")
    try:
        async with projecting(endpoints, topics) as run:
            await publish(endpoints.kafka_bootstrap, topics, every)
            assert await applied(pool, every)
    finally:
        faults.configure("")
    assert any("injected at projection.after_apply_before_commit" in record.getMessage()
               for record in caplog.records)  # the first batch was rolled back and redelivered
    assert (run.totals.applied, run.totals.dead_lettered) == (len(every), [])
    projected = await live(pool, run_ids)
    assert first_difference(projected, await clean(pool, topics.deliveries(every), run_ids)) is None
    assert await written(pool, run_ids) == 0


async def test_two_replicas_sharing_one_runs_topics_agree_with_a_clean_run(pool, endpoints):
    """Topics with different partition counts: one run's intake, policy and dispatcher events
    are applied by different replicas at once, serialized by the run's lock."""
    await migrate_service(pool, "projection")
    topics = LedgerTopics()
    for topic, partitions in ((topics.intake, 4), (topics.authorizations, 3),
                              (topics.dispatch, 2), (topics.effects, 4)):
        await create_topic(endpoints.kafka_bootstrap, topic, partitions=partitions)
    stories = [story for story, _ in mixed_runs(200, seed=29)]
    run_ids = [story.run_id for story in stories]
    every = [event for story in stories for event in story.events]
    async with projecting(endpoints, topics) as first, projecting(endpoints, topics) as second:
        assert await group_members(endpoints.kafka_bootstrap) >= 2
        await publish(endpoints.kafka_bootstrap, topics, every)
        assert await applied(pool, every)
    assert first.totals.applied and second.totals.applied
    assert first.totals.applied + second.totals.applied == len(every)
    projected = await live(pool, run_ids)
    assert first_difference(projected, await clean(pool, topics.deliveries(every), run_ids)) is None


async def test_a_replay_of_a_thousand_mixed_runs_equals_the_live_projection(
        pool, endpoints, topics):
    runs = mixed_runs(1000, seed=17)
    run_ids = [story.run_id for story, _ in runs]
    every = [event for story, _ in runs for event in story.events]
    started = time.monotonic()
    async with projecting(endpoints, topics):
        await publish(endpoints.kafka_bootstrap, topics, every)
        assert await applied(pool, every, timeout=280)
    projected_in = time.monotonic() - started
    verdict = await replay(pool, run_ids)
    assert verdict.agrees, verdict.difference
    assert (verdict.events, verdict.runs) == (len(every), 1000)
    assert verdict.live_hash == verdict.replayed_hash
    projected = await live(pool, run_ids)
    shuffled = topics.deliveries(random.Random(1).sample(every, len(every)))
    reference = await clean(pool, shuffled, run_ids)
    assert first_difference(projected, reference) is None
    for story, stories in runs:
        assert projected.runs[story.key].status == expected_status(stories), stories
    unknown = [s for s, names in runs if "unknown" in names]
    assert unknown and all(projected.runs[s.key].status != "completed" for s in unknown)
    print(f"\n{len(every)} events of 1000 runs projected in {projected_in:.1f} s")


async def test_replay_verify_passes_then_names_a_row_changed_by_hand(pool, endpoints, topics):
    story = RunStory().tell("saga")
    async with projecting(endpoints, topics):
        await publish(endpoints.kafka_bootstrap, topics, story.events)
        assert await applied(pool, story.events)
    command = [sys.executable, "-m", "intentledger.cli", "replay", "--run", story.run_id, "--verify"]
    env = {"INTENTLEDGER_KAFKA_BOOTSTRAP": endpoints.kafka_bootstrap,
           "INTENTLEDGER_DATABASE_URL": endpoints.database_url}
    agreed = subprocess.run(command, env=os.environ | env, capture_output=True, text=True,
                            timeout=60)
    assert agreed.returncode == 0, agreed.stdout + agreed.stderr
    assert "reducer:  projection.v2" in agreed.stdout and "verified" in agreed.stdout
    live_hash = agreed.stdout.split("live:")[1].split()[0]
    assert live_hash == agreed.stdout.split("replay:")[1].split()[0]
    changed = await pool.fetchval("UPDATE projection.calls SET state = 'FAILED' WHERE run_id = $1"
                                  " AND state = 'COMPENSATED' RETURNING logical_call_id",
                                  story.run_id)
    try:
        differs = subprocess.run(command, env=os.environ | env, capture_output=True, text=True,
                                 timeout=60)
    finally:  # the schema is shared: leave the history and its read models agreeing
        await pool.execute("UPDATE projection.calls SET state = 'COMPENSATED'"
                           " WHERE logical_call_id = $1", changed)
    assert differs.returncode == 1
    assert f"MISMATCH: call {changed} of run {story.key}" in differs.stdout
    assert '"state": "FAILED"' in differs.stdout and '"state": "COMPENSATED"' in differs.stdout
