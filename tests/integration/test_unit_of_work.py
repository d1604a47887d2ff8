"""State and outbox rows commit together or not at all (the outbox's whole point), and only
committed rows are counted in ``outbox_emitted_total``."""

import asyncpg
import pytest
from prometheus_client import REGISTRY, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from shared import telemetry
from shared.db.unit_of_work import UnitOfWork
from shared.messaging.envelope import Envelope
from tests.support.probe import Probe

pytestmark = pytest.mark.infra


def _event(run: str = "run-1") -> Envelope:
    return Envelope.new(event_type="ProbeSeen", run_id=run, producer="test",
                        payload={"item": run, "seq": 1})


async def _write_state(uow: UnitOfWork, probe: Probe, item: str) -> None:
    await uow.connection.execute(
        f'INSERT INTO "{probe.schema}".items (id, state, version) VALUES ($1, $2, 1)', item, "seen")


async def test_commit_writes_state_and_outbox_rows_together(pool):
    probe = await Probe(pool, "t.topic").create()
    async with UnitOfWork(pool, probe.schema) as uow:
        await _write_state(uow, probe, "a")
        uow.emit("t.topic", _event("a"))
        await uow.commit()
    assert await probe.fetchval("SELECT count(*) FROM {s}.items") == 1
    assert await probe.outbox_status() == {"pending": 1}


async def test_rolls_back_uncommitted_work_by_default(pool):
    probe = await Probe(pool, "t.topic").create()
    async with UnitOfWork(pool, probe.schema) as uow:
        await _write_state(uow, probe, "a")
        uow.emit("t.topic", _event("a"))
    assert await probe.fetchval("SELECT count(*) FROM {s}.items") == 0
    assert await probe.outbox_status() == {}


async def test_handler_error_after_state_write_leaves_nothing(pool):
    probe = await Probe(pool, "t.topic").create()
    with pytest.raises(RuntimeError):
        async with UnitOfWork(pool, probe.schema) as uow:
            await _write_state(uow, probe, "a")
            uow.emit("t.topic", _event("a"))
            raise RuntimeError("crash between the state change and commit")
    assert await probe.fetchval("SELECT count(*) FROM {s}.items") == 0
    assert await probe.outbox_status() == {}


async def test_failing_outbox_insert_rolls_back_the_state_change(pool):
    probe = await Probe(pool, "t.topic").create()
    duplicate = _event("a")
    async with UnitOfWork(pool, probe.schema) as uow:
        uow.emit("t.topic", duplicate)
        await uow.commit()
    with pytest.raises(asyncpg.UniqueViolationError):
        async with UnitOfWork(pool, probe.schema) as uow:
            await _write_state(uow, probe, "b")
            uow.emit("t.topic", duplicate)  # same event id: the outbox refuses it
            await uow.commit()
    assert await probe.fetchval("SELECT count(*) FROM {s}.items") == 0
    assert await probe.outbox_status() == {"pending": 1}


async def test_inbox_claim_returns_only_unseen_event_ids(pool):
    probe = await Probe(pool, "t.topic").create()
    first, second = _event(), _event()
    async with UnitOfWork(pool, probe.schema) as uow:
        assert await uow.claim("c", [first.event_id]) == {first.event_id}
        await uow.commit()
    async with UnitOfWork(pool, probe.schema) as uow:
        assert await uow.claim("c", [first.event_id, second.event_id]) == {second.event_id}
        assert await uow.claim("other", [first.event_id]) == {first.event_id}


def _emitted(schema: str) -> dict[tuple[str, str], float]:
    """This process's /metrics: (event type, reason) → events emitted by ``schema``'s outbox."""
    text = generate_latest(REGISTRY).decode()
    return {(sample.labels["event_type"], sample.labels["reason"]): sample.value
            for family in text_string_to_metric_families(text) for sample in family.samples
            if sample.name == "outbox_emitted_total" and sample.labels.get("schema") == schema}


async def test_only_committed_outbox_rows_are_counted_by_type_and_reason(pool):
    telemetry.install("test")  # what every service process does first
    committed, rolled_back = await Probe(pool, "t.topic").create(), await Probe(pool, "t.topic").create()
    async with UnitOfWork(pool, committed.schema) as uow:
        uow.emit("t.topic", _event("a"))
        uow.emit("t.topic", Envelope.new(event_type="DispatchRefused", run_id="a", producer="test",
                                         payload={"reason": "capability_key_unknown"}))
        await uow.commit()
    async with UnitOfWork(pool, rolled_back.schema) as uow:
        uow.emit("t.topic", _event("b"))
    assert _emitted(committed.schema) == {("ProbeSeen", ""): 1,
                                          ("DispatchRefused", "capability_key_unknown"): 1}
    assert _emitted(rolled_back.schema) == {}, "a rolled-back transaction emitted nothing"


async def test_hooks_run_inside_then_after_the_commit_and_die_with_a_savepoint(pool):
    """``before_commit`` work shares the transaction (its writes and events commit with the
    rest; registered twice, it runs once); ``after_commit`` runs only once the commit is durable;
    a hook registered inside a savepoint that rolls back is gone with the savepoint's events."""
    probe = await Probe(pool, "t.topic").create()
    ran: list[str] = []
    seen_after: list[int] = []

    async def before() -> None:
        ran.append("before")
        await _write_state(uow, probe, "written-at-commit")
        uow.emit("t.topic", _event("at-commit"))

    async def dropped() -> None:
        ran.append("dropped")

    async def after() -> None:
        seen_after.append(await probe.fetchval("SELECT count(*) FROM {s}.items"))

    async with UnitOfWork(pool, probe.schema) as uow:
        uow.before_commit(before)
        uow.before_commit(before)
        uow.after_commit(after)
        with pytest.raises(RuntimeError):
            async with uow.savepoint():
                uow.before_commit(dropped)
                uow.after_commit(dropped)
                raise RuntimeError("a bad record, isolated")
        assert ran == []
        await uow.commit()
    assert ran == ["before"]
    assert seen_after == [1]  # visible from another connection: committed
    assert await probe.outbox_status() == {"pending": 1}

    async with UnitOfWork(pool, probe.schema) as uow:  # never committed: no hook runs
        uow.before_commit(dropped)
        uow.after_commit(dropped)
    assert ran == ["before"]
