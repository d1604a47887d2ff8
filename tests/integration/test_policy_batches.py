"""Accepted intents decided as a batch (``decide_all``, the consumer's path) get the verdicts
they get decided one by one, each after the previous one's decision was written: limits count
the calls allowed earlier in the batch, a call decided already or twice in the batch is
decided once; and the batch costs as many statements for one intent as for twenty."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest

from services.policy.handlers import PolicyHandler
from services.policy.outcomes import Destinations
from services.policy.repository import SCHEMA, record_version
from services.policy.settings import PolicySettings
from shared.config import Settings
from shared.contracts.intake import PROPOSAL_ACCEPTED, Intent
from shared.db.schemas import migrate_service
from shared.db.unit_of_work import UnitOfWork
from shared.identity import capability_keys
from shared.identity.principals import PrincipalsWatcher
from shared.messaging.envelope import Envelope
from shared.policy.watcher import PolicyWatcher
from tests.support.statements import counted
from tests.unit.policy.builders import REGISTRY, debit, intent

pytestmark = pytest.mark.infra
POLICY = """
rules:
  - name: debits-up-to-100
    principals: ["agent-*"]
    tenants: ["*"]
    tools: [wallet.debit]
    effect: allow
    max_amount_minor: 10000
    currency: EUR
    over_cap: require_approval
    approval: {quorum: 1, approvers: ["operator:*"], ttl_seconds: 600}
  - {name: reserves, principals: ["agent-*"], tenants: ["*"], tools: [inventory.reserve],
     effect: allow}
limits:
  - {name: reserves-per-agent, scope: principal, tools: [inventory.reserve],
     window_seconds: 3600, max_calls: 2}
  - {name: money-per-agent, scope: principal, tools: [wallet.debit], window_seconds: 3600,
     max_amount_minor: 12000, currency: EUR}
"""


@pytest.fixture
async def handler(pool, tmp_path) -> PolicyHandler:
    await migrate_service(pool, SCHEMA)
    policy_file = tmp_path / "policy.yaml"
    policy_file.write_text(POLICY, encoding="utf-8")
    policies = PolicyWatcher(policy_file, 60)
    await record_version(pool, policies.current)
    return PolicyHandler(policies, REGISTRY,
                         capability_keys.signing_key(Settings()), Destinations(),
                         PrincipalsWatcher(PolicySettings().principals_file, 60))


def _accepted(call: Intent) -> Envelope:
    return Envelope.new(event_type=PROPOSAL_ACCEPTED, run_id=call.run_id, producer="proposal-intake",
                        payload=call.model_dump(mode="json"))


def _calls(principal: str) -> tuple[Intent, list[Intent]]:
    """(a call decided before the batch, the batch)."""
    who = {"principal": principal, "deadline_at": datetime.now(UTC) + timedelta(hours=1)}

    def reserve(order: str) -> Intent:
        return intent("inventory.reserve", {"sku": "s-1", "order_id": order, "quantity": 1}, **who)

    before = reserve("o-0")
    first_debit = debit("60.00", **who)
    unknown = debit("1.00", **who).model_copy(update={"tool_name": "no.such_tool"})
    return before, [before, reserve("o-1"), reserve("o-2"), first_debit, debit("70.00", **who),
                    debit("50.00", **who), debit("150.00", **who), first_debit, unknown]


async def _decided(pool, calls: list[Intent]) -> list[tuple]:
    rows = {row["logical_call_id"]: (row["outcome"], row["reason_code"]) for row in await pool.fetch(
        f"SELECT logical_call_id, outcome, reason_code FROM {SCHEMA}.decisions "
        "WHERE logical_call_id = ANY($1::uuid[])", [c.logical_call_id for c in calls])}
    announced = [row["kind"] for row in await pool.fetch(
        f"SELECT envelope->>'event_type' AS kind FROM {SCHEMA}.outbox "
        "WHERE coalesce(envelope->'payload'->'intent'->>'logical_call_id',"  # the verdict's
        "               envelope->'payload'->>'logical_call_id')"  # what its agent is told
        " = ANY($1::text[]) ORDER BY position",
        [str(c.logical_call_id) for c in calls])]
    return [rows.get(c.logical_call_id) for c in calls] + announced


async def _in_one_transaction(pool, handler: PolicyHandler, calls: list[Intent]) -> None:
    async with UnitOfWork(pool, SCHEMA) as uow:
        await handler.decide_all(uow, [_accepted(c) for c in calls])
        await uow.commit()


async def test_a_batch_gets_the_verdicts_its_intents_get_one_by_one(pool, handler):
    together, one_by_one = (f"agent-{uuid.uuid4().hex[:10]}" for _ in range(2))
    before, batch = _calls(together)
    await _in_one_transaction(pool, handler, [before])
    await _in_one_transaction(pool, handler, batch)
    before, singly = _calls(one_by_one)
    for call in [before, *singly]:
        async with UnitOfWork(pool, SCHEMA) as uow:
            await handler.decide(uow, _accepted(call))
            await uow.commit()

    expected = await _decided(pool, singly)
    assert expected[:9] == [("allowed", None), ("allowed", None), ("denied", "rate_limited"),
                            ("allowed", None), ("denied", "velocity_limited"), ("allowed", None),
                            ("awaiting_approval", None), ("allowed", None),
                            ("denied", "tool_not_in_registry")]
    assert await _decided(pool, batch) == expected


async def test_a_batch_takes_as_many_statements_for_one_intent_as_for_twenty(pool, handler):
    async def statements(count: int) -> int:
        principal = f"agent-{uuid.uuid4().hex[:10]}"
        async with UnitOfWork(pool, SCHEMA) as uow:
            with counted(uow.connection) as queries:
                await handler.decide_all(uow, [_accepted(debit(
                    "1.00", principal=principal, deadline_at=datetime.now(UTC) + timedelta(hours=1)))
                    for _ in range(count)])
                await uow.commit()
        return len(queries)

    assert await statements(1) == await statements(20)
