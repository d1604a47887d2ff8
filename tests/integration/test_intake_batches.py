"""The intake's set-wise path (``batch.py``) against its reference, ``Intake.take`` record by
record: the same answers in the same order, the same rows, in a number of statements that
does not grow with the batch; and a batch that loses a race is taken again and then answers
like the reference."""

import asyncio
import json
import uuid
from pathlib import Path

import pytest

from services.proposal_intake import rates
from services.proposal_intake.batch import RaceLost
from services.proposal_intake.handlers import Intake, RawProposal
from services.proposal_intake.repository import SCHEMA
from services.proposal_intake.settings import IntakeSettings
from shared.db.schemas import migrate_service
from shared.db.unit_of_work import UnitOfWork
from shared.identity.principals import PrincipalsWatcher
from shared.tools import load_registry
from tests.support.identities import signature
from tests.support.intake import generic, new_run
from tests.support.statements import counted

pytestmark = pytest.mark.infra
REGISTRY = Path(__file__).parents[2] / "config" / "tools.example.yaml"
OTHER_ARGUMENTS = {"wallet_id": "w-1", "amount": "41.00", "currency": "EUR"}


@pytest.fixture
async def intake(pool) -> Intake:
    await migrate_service(pool, SCHEMA)
    settings = IntakeSettings()
    return Intake(load_registry(REGISTRY), settings, PrincipalsWatcher(settings.principals_file))


def _signed(message: dict, person: str | None = None) -> RawProposal:
    """Signed by the principal the body names, or with ``person`` by the MCP gateway for it."""
    value = json.dumps(message).encode()
    signed = signature(value) if person is None else signature(
        value, "mcp-gateway", agent=message["principal_id"], person=person)
    return RawProposal(uuid.uuid4(), value, signatures=(signed,))


def _mixed(runs: list[str]) -> list[RawProposal]:
    """Every way a call is answered that depends on the calls before it in the batch."""
    budget, deadline = {"budget": {"max_calls": 2}}, {"deadline_at": "2020-01-01T00:00:00Z"}
    first, second, late, others, people = runs
    first_key = generic(first, operation_key="k1")["operation_key"]

    def for_person(call: str, person: str | None, key: str = "kp") -> RawProposal:
        """agent-7's call in one run, through the gateway for ``person`` (None: itself)."""
        return _signed(generic(people, call, operation_key=key, principal_id="agent-7"), person)

    return [_signed(m) for m in [
            generic(first, "c1", operation_key="k1", **budget),
            generic(first, "c2", operation_key="k1"),  # same key, same arguments: duplicate
            generic(first, "c3", operation_key="k1", arguments=OTHER_ARGUMENTS),  # conflict
            generic(first, "c4", operation_key="k4"),
            generic(first, "c5", operation_key="k5"),  # the run's budget is spent
            generic(second, "c1", operation_key="k6"),
            generic(second, "c1", operation_key="k7"),  # the call id is taken in this run
            generic(second, "c8", tool="no.such_tool", operation_key="k8"),
            {"format": "generic", "run_id": second, "tenant_id": "acme", "call_id": "c9"},
            generic(late, "c1", operation_key="k9", **deadline),
            # another principal under the first run's key, with its arguments and others
            generic(others, "c1", operation_key=None, principal_id="mallory") | {
                "operation_key": first_key},
            generic(others, "c2", operation_key=None, principal_id="mallory",
                    arguments=OTHER_ARGUMENTS) | {"operation_key": first_key}]] + [
        # the people behind one agent: a person's retry, another person, the agent itself,
        # then another person and the agent in the first person's run under keys of their own
        for_person("c1", "finance:a"), for_person("c2", "finance:a"),
        for_person("c3", "finance:b"), for_person("c4", None),
        for_person("c5", "finance:b", "kb"), for_person("c6", None, "kn")]


async def _answers(pool, runs: list[str]) -> list[tuple]:
    """Both topics' answers in outbox order, with the runs named by their place in ``runs``."""
    rows = await pool.fetch(
        f"SELECT topic, partition_key, envelope->>'event_type' AS kind, envelope->'payload' AS p "
        f"FROM {SCHEMA}.outbox WHERE partition_key = ANY($1) ORDER BY position", runs)
    return [(row["topic"], runs.index(row["partition_key"]), row["kind"],
             *(json.loads(row["p"]).get(field) for field in (
                 "call_id", "reason_code", "outcome", "person_id"))) for row in rows]


async def _rows(pool, runs: list[str]) -> list[tuple]:
    found = await pool.fetch(
        f"SELECT r.run_id, r.call_count, r.cost_spent_minor, count(c.*) AS intents,"
        " array_agg((c.person_id, c.person_recorded)::text ORDER BY c.provider_call_id) AS persons"
        f" FROM {SCHEMA}.runs r LEFT JOIN {SCHEMA}.logical_calls c USING (tenant_id, run_id) "
        "WHERE r.run_id = ANY($1) GROUP BY r.run_id, r.call_count, r.cost_spent_minor", runs)
    return sorted((runs.index(row["run_id"]), row["call_count"], row["cost_spent_minor"],
                   row["intents"], tuple(row["persons"])) for row in found)


async def test_a_batch_is_answered_as_its_records_one_by_one_would_be(pool, intake):
    together, one_by_one = [new_run() for _ in range(5)], [new_run() for _ in range(5)]
    async with UnitOfWork(pool, SCHEMA) as uow:
        await intake.take_all(uow, _mixed(together))
        await uow.commit()
    for raw in _mixed(one_by_one):
        async with UnitOfWork(pool, SCHEMA) as uow:
            await intake.take(uow, raw)
            await uow.commit()

    expected = await _answers(pool, one_by_one)
    assert {kind for _, _, kind, *_ in expected} == {
        "ProposalAccepted", "DuplicateProposal", "ProposalRejected"}
    assert {reason for _, run, _, _, reason, *_ in expected if run == 3} == {
        "operation_key_in_use"}
    assert [(call, reason or outcome, person) for topic, run, _, call, reason, outcome, person
            in expected if run == 4 and topic == "agent.results.acme"] == [
        ("c1", "accepted", "finance:a"), ("c2", "duplicate", "finance:a"),
        ("c3", "operation_key_in_use", "finance:b"), ("c4", "operation_key_in_use", None),
        ("c5", "run_principal_mismatch", "finance:b"), ("c6", "run_principal_mismatch", None)]
    assert await _answers(pool, together) == expected
    assert await _rows(pool, together) == await _rows(pool, one_by_one) != []


async def test_a_committed_intent_is_answered_by_its_person_and_an_older_one_by_its_principal(
        pool, intake):
    """Under a key whose intent is committed already, through the set-wise path and the
    record-by-record one alike: its person's retry is its duplicate, another person behind the
    same agent is refused ``operation_key_in_use``, and under a key of its own in that run
    ``run_principal_mismatch``. An intent and a run recorded before the intake kept persons
    (migrations 0007 and 0008: ``person_recorded`` false) are its principal's alone, as they
    were then."""
    people, older = new_run(), new_run()

    def call(run: str, name: str, person: str, key: str = "kp") -> RawProposal:
        return _signed(generic(run, name, operation_key=key, principal_id="agent-7"), person)

    async def taken(*raws: RawProposal, one_by_one: bool = False) -> None:
        async with UnitOfWork(pool, SCHEMA) as uow:
            if one_by_one:
                for raw in raws:
                    await intake.take(uow, raw)
            else:
                await intake.take_all(uow, list(raws))
            await uow.commit()

    await taken(call(people, "c1", "finance:a"), call(older, "c1", "finance:a"))
    for table in ("logical_calls", "runs"):
        await pool.execute(f"UPDATE {SCHEMA}.{table} SET person_id = NULL,"
                           " person_recorded = false WHERE run_id = $1", older)
    await taken(call(people, "c2", "finance:a"), call(people, "c3", "finance:b"),
                call(older, "c2", "finance:b"), call(people, "c4", "finance:b", "kb"),
                call(older, "c3", "finance:b", "kb"))
    await taken(call(people, "c5", "finance:a"), call(people, "c6", "finance:b"),
                call(older, "c4", "finance:b"), call(people, "c7", "finance:b", "kc"),
                call(older, "c5", "finance:b", "kc"), one_by_one=True)

    answers = await _answers(pool, [people, older])
    assert [(run, call, reason or outcome) for topic, run, _, call, reason, outcome, _ in answers
            if topic == "agent.results.acme"] == [
        (0, "c1", "accepted"), (1, "c1", "accepted"),
        (0, "c2", "duplicate"), (0, "c3", "operation_key_in_use"), (1, "c2", "duplicate"),
        (0, "c4", "run_principal_mismatch"), (1, "c3", "accepted"),
        (0, "c5", "duplicate"), (0, "c6", "operation_key_in_use"), (1, "c4", "duplicate"),
        (0, "c7", "run_principal_mismatch"), (1, "c5", "accepted")]


async def _statements(pool, intake: Intake, messages: list[dict]) -> int:
    async with UnitOfWork(pool, SCHEMA) as uow:
        with counted(uow.connection) as queries:
            await intake.take_all(uow, [_signed(m) for m in messages])
            await uow.commit()
    return len(queries)


async def test_a_batch_takes_as_many_statements_for_one_record_as_for_twenty(pool, intake):
    one = await _statements(pool, intake, [generic(new_run(), "c1")])
    twenty = await _statements(pool, intake, [generic(new_run(), f"c{n}", operation_key=f"k{n}")
                                              for n in range(20)])
    assert one == twenty


@pytest.mark.parametrize("same_arguments, expected", [(True, "DuplicateProposal"),
                                                      (False, "ProposalRejected")])
async def test_a_batch_that_loses_a_key_race_is_taken_again_and_answers_duplicate_or_conflict(
        pool, intake, same_arguments, expected):
    key = f"race-{uuid.uuid4().hex[:8]}"
    first_run, second_run, bystander = new_run(), new_run(), new_run()
    first = generic(first_run, "c1", operation_key=None) | {"operation_key": key}
    second = generic(second_run, "c2", operation_key=None,
                     arguments=None if same_arguments else OTHER_ARGUMENTS) | {"operation_key": key}

    records = [_signed(generic(bystander, "c0")), _signed(second)]

    async def batch() -> None:
        async with UnitOfWork(pool, SCHEMA) as uow:
            await intake.take_all(uow, records)
            await uow.commit()

    async with UnitOfWork(pool, SCHEMA) as winner:
        # The winner holds the key and no rate bucket: the buckets serialize one tenant's
        # intake transactions today, and the batch must not depend on that.
        raw = _signed(first)
        outcomes = intake.outcomes(winner, raw)
        await intake.take_calls(winner, outcomes, *intake.read(outcomes, raw))
        loser = asyncio.create_task(batch())
        await asyncio.sleep(0.5)
        assert not loser.done(), "the batch's insert waits on the first one's key"
        await winner.commit()
    with pytest.raises(RaceLost):  # rolled back: the consumer delivers the batch again
        await loser
    await batch()

    answers = await _answers(pool, [first_run, second_run, bystander])
    agent = [(run, kind, reason) for topic, run, kind, _, reason, *_ in answers
             if topic == "agent.results.acme"]
    assert agent == [(0, "ProposalAccepted", None), (2, "ProposalAccepted", None),
                     (1, expected, None if same_arguments else "operation_key_conflict")]
    assert await pool.fetchval(f"SELECT count(*) FROM {SCHEMA}.logical_calls WHERE run_id = ANY($1)",
                               [first_run, second_run, bystander]) == 2


async def test_a_batch_spends_the_buckets_as_its_messages_one_by_one_would(pool, intake):
    """Three messages fit the principal's burst of five, the fourth must wait, one larger than
    the burst is told to split, and another principal of the tenant still has its own."""
    await migrate_service(pool, SCHEMA)

    def settings(t: str) -> IntakeSettings:
        return IntakeSettings(tenant_limits={t: {"principal_calls_per_second": 0.001,
                                                 "principal_calls_burst": 5}})

    def spendings(t: str) -> list[rates.Spending]:
        return [rates.Spending(t, principal, calls) for principal, calls in
                (("user-42", 2), ("user-42", 6), ("user-42", 2), ("user-7", 4), ("user-42", 1),
                 ("user-42", 1))]

    together, one_by_one = f"t{uuid.uuid4().hex[:8]}", f"t{uuid.uuid4().hex[:8]}"
    async with pool.acquire() as conn, conn.transaction():
        batch = (await rates.spend_all(conn, spendings(together), settings(together))).answers
    singly = []
    for spending in spendings(one_by_one):
        async with pool.acquire() as conn, conn.transaction():
            singly.append(await rates.spend(conn, spending.tenant_id, spending.principal_id,
                                            spending.calls, settings(one_by_one)))

    def shown(answers):
        return [None if a is None else (a.bucket, a.retry_after_s is None) for a in answers]

    assert shown(batch) == shown(singly) == [None, ("principal", True), None, None, None,
                                             ("principal", False)]
