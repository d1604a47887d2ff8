"""The policy service on real Kafka and PostgreSQL: intents are published on its intake topic as
the intake's relay would, approvals as an approver's tool would (signed with the session's keys,
``tests/support/identities.py``), and its decisions are read back from its authorizations topic
(per-test topics, run ids, tenants and principals)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest
import yaml
from aiokafka import AIOKafkaProducer

from shared.policy import load_policy
from shared.operator.approve import Answer, send_answer
from shared.policy.document import ApprovalRule
from services.policy.main import run_policy
from services.policy.repository import SCHEMA, insert_decision, record_version
from services.policy.outcomes import Destinations
from services.policy.settings import PolicySettings
from services.policy.sweep import sweep_once
from services.policy.verdicts import Verdict
from shared.db.schemas import migrate_service
from shared import faults
from shared.capabilities import refusal
from shared.config import Endpoints
from shared.contracts.approvals import APPROVAL_GRANTED, ApprovalDecision
from shared.contracts.authorizations import Authorization
from shared.contracts.intake import PROPOSAL_ACCEPTED, Intent
from shared.messaging.envelope import Envelope
from shared.operator.publish import publish
from shared.identity.signatures import APPROVAL
from tests.support.identities import local, signer
from tests.support import identities
from shared.topology import results_topic
from tests.support.kafka import create_topic, read_topic, unique_topic, wait_for
from tests.support.services import ServiceRun, running_service
from tests.unit.policy.builders import EMAIL, intent

pytestmark = pytest.mark.infra
POLICY = """
capability_ttl_seconds: 120
rules:
  - {name: debits, principals: ["agent-*"], tenants: ["*"], tools: [wallet.debit], effect: allow,
     max_amount_minor: 10000, currency: EUR, over_cap: require_approval,
     approval: {quorum: 2, approvers: ["operator:*", "finance:*"], ttl_seconds: 600}}
  - {name: refunds, principals: ["agent-*"], tenants: ["*"], tools: [wallet.refund],
     effect: require_approval, approval: {quorum: 1, approvers: ["operator:*"], ttl_seconds: 1}}
  - {name: email, principals: ["agent-*"], tenants: ["*"], tools: [email.send],
     effect: require_approval, approval: {quorum: 1, approvers: ["operator:*", "agent-*"]}}
  - {name: reserves, principals: ["agent-*"], tenants: ["*"], tools: [inventory.reserve], effect: allow}
limits:
  - {name: reserves-per-agent, scope: principal, tools: [inventory.reserve], window_seconds: 3,
     max_calls: 2}
"""


@dataclass
class PolicyRun(ServiceRun):
    settings: PolicySettings
    endpoints: Endpoints

    async def propose(self, *intents: Intent) -> None:
        await publish(self.endpoints.kafka_bootstrap, self.settings.intake_topic, *(Envelope.new(
            event_type=PROPOSAL_ACCEPTED, run_id=i.run_id, producer="proposal-intake",
            payload=i.model_dump(mode="json")) for i in intents))

    async def approve(self, call: Intent, approver: str, *, signed_by: str | None = None,
                      person: str | None = None, unsigned: bool = False, **changes) -> Envelope:
        """A grant naming ``approver``, signed by ``signed_by`` (the approver unless given),
        for ``person`` when a console signs; ``unsigned``: no signature at all."""
        now = datetime.now(UTC)
        fields = {"decision": "granted", "run_id": call.run_id, "tenant_id": call.tenant_id,
                  "logical_call_id": call.logical_call_id, "operation_key": call.operation_key,
                  "arguments_hash": call.arguments_hash, "approver_id": approver,
                  "decided_at": now, "expires_at": now + timedelta(minutes=15)}
        envelope = Envelope.new(event_type=APPROVAL_GRANTED, run_id=call.run_id, producer="test",
                                payload=ApprovalDecision(**fields | changes).model_dump(mode="json"))
        signature = None if unsigned else signer(signed_by or approver, person).signature(
            envelope.value(), tenant_id=call.tenant_id, use=APPROVAL)
        await publish(self.endpoints.kafka_bootstrap, self.settings.approvals_topic, envelope,
                      signature=signature)
        return envelope

    async def answer(self, call: Intent, approver: str, granted: bool = True) -> dict:
        """As ``intentledger approve|reject`` does it."""
        return await send_answer(self.endpoints, Answer(call.logical_call_id, granted),
                                 topic=self.settings.approvals_topic, signer=signer(approver))

    async def told(self, pool, the_call: Intent) -> list[tuple[str, dict]]:
        return await told(pool, self.settings.results_family, the_call)

    async def events(self, count: int) -> list[dict]:
        records = await read_topic(self.endpoints.kafka_bootstrap, self.settings.authorizations_topic,
                                   until=count, timeout=60)
        return [json.loads(record.value) for record in records]


@pytest.fixture(autouse=True)
async def policy_schema(pool) -> None:
    await migrate_service(pool, SCHEMA)


@asynccontextmanager
async def running_policy(endpoints: Endpoints, tmp_path, **overrides) -> AsyncIterator[PolicyRun]:
    policy_file = tmp_path / f"policy-{uuid.uuid4().hex[:6]}.yaml"
    policy_file.write_text(POLICY, encoding="utf-8")
    settings = PolicySettings(
        policy_file=policy_file, intake_topic=unique_topic("ledger.intake"),
        approvals_topic=unique_topic("ledger.approvals"),
        authorizations_topic=unique_topic("ledger.authorizations"),
        results_family=unique_topic("agent.results"), **overrides)
    for topic in (settings.intake_topic, settings.approvals_topic, settings.authorizations_topic):
        await create_topic(endpoints.kafka_bootstrap, topic)
    run = PolicyRun(settings, endpoints)
    async with running_service(endpoints, SCHEMA, lambda base, stopping: run_policy(
            base, settings, stopping), run):
        yield run


def call(tool: str = "wallet.debit", arguments: dict | None = None, *, run: str, principal: str,
         deadline_in: timedelta = timedelta(minutes=10)) -> Intent:
    """An intent of its own test: unique tenant, run and principal keep counts and topics apart."""
    made = intent(tool, arguments, principal=principal, tenant="acme",
                  deadline_at=datetime.now(UTC) + deadline_in)
    return made.model_copy(update={"run_id": run})


def ids() -> tuple[str, str]:
    tag = uuid.uuid4().hex[:10]
    return f"run-{tag}", f"agent-{tag}"


def debit(amount: str, **who) -> Intent:
    return call("wallet.debit", {"wallet_id": "w-1", "amount": amount, "currency": "EUR"}, **who)


def email(**who) -> Intent:
    return call("email.send", EMAIL | {"message_id": f"msg-{uuid.uuid4().hex}"}, **who)


async def decision(pool, the_call: Intent, outcome: str | None = None, timeout: float = 60):
    async def found():
        row = await pool.fetchrow(f"SELECT * FROM {SCHEMA}.decisions WHERE logical_call_id = $1",
                                  the_call.logical_call_id)
        return row if row and (outcome is None or row["outcome"] == outcome) else None
    row = await wait_for(found, timeout=timeout)
    assert row is not None, f"no {outcome or ''} decision for {the_call.logical_call_id}"
    return row


async def approval_outcome(pool, event: Envelope) -> tuple[str, str | None]:
    async def found():
        return await pool.fetchrow(f"SELECT outcome, reason_code FROM {SCHEMA}.approvals "
                                   "WHERE approval_event_id = $1", event.event_id)
    row = await wait_for(found)
    assert row is not None, f"approval {event.event_id} was never recorded"
    return row["outcome"], row["reason_code"]


async def told(pool, results_family: str, the_call: Intent) -> list[tuple[str, dict]]:
    """What the policy wrote for ``the_call``'s agent, to its tenant's results topic, in the
    order its outbox recorded it: (event type, payload)."""
    rows = await pool.fetch(
        f"SELECT envelope FROM {SCHEMA}.outbox WHERE topic = $1"
        " AND envelope->'payload'->>'logical_call_id' = $2 ORDER BY position",
        results_topic(the_call.tenant_id, results_family), str(the_call.logical_call_id))
    return [(e["event_type"], e["payload"]) for e in map(json.loads,
                                                         (r["envelope"] for r in rows))]


def of(events: list[dict], the_call: Intent) -> list[tuple[str, dict]]:
    return [(e["event_type"], e["payload"]) for e in events
            if e["payload"]["intent"]["logical_call_id"] == str(the_call.logical_call_id)]


async def test_an_allowed_call_carries_a_capability_that_verifies_for_its_intent(pool, endpoints, tmp_path):
    run, agent = ids()
    small = debit("40.00", run=run, principal=agent)
    async with running_policy(endpoints, tmp_path) as policy:
        await policy.propose(small)
        [event] = await policy.events(1)
    assert event["event_type"] == "AuthorizationAllowed" and event["run_id"] == run
    allowed = Authorization.model_validate(event["payload"])
    assert allowed.intent == small and allowed.rule == "debits"
    assert refusal(allowed.capability, small, identities.capability_public_keys(), datetime.now(UTC)) is None
    assert allowed.capability.expires_at <= datetime.now(UTC) + timedelta(seconds=120)
    assert allowed.capability.limits["cap"]["amount_minor"] == 4000
    row = await decision(pool, small)
    assert (row["outcome"], row["rule"], row["policy_version"]) == (
        "allowed", "debits", allowed.policy_version)
    assert json.loads(row["capability"])["signature"] == allowed.capability.signature
    assert await pool.fetchval(f"SELECT count(*) FROM {SCHEMA}.policy_versions WHERE version = $1",
                               allowed.policy_version) == 1
    assert await policy.told(pool, small) == []  # the dispatcher's to tell


async def test_calls_are_denied_with_stable_reasons(pool, endpoints, tmp_path):
    run, agent = ids()
    unknown_rule = call("wallet.debit", {"wallet_id": "w-1", "amount": "1", "currency": "EUR"},
                        run=run, principal=f"user-{agent}")
    late = debit("1.00", run=run, principal=agent, deadline_in=timedelta(seconds=-1))
    dollars = call("wallet.debit", {"wallet_id": "w-1", "amount": "1", "currency": "USD"},
                   run=run, principal=agent)
    other_version = debit("2.00", run=run, principal=agent).model_copy(update={"tool_version": "9"})
    expected = [(unknown_rule, "no_matching_rule"), (late, "deadline_passed"),
                (dollars, "cap_currency_mismatch"), (other_version, "tool_not_in_registry")]
    async with running_policy(endpoints, tmp_path) as policy:
        await policy.propose(*(c for c, _ in expected))
        events = await policy.events(len(expected))
    reasons = {e["payload"]["intent"]["logical_call_id"]: (e["event_type"], e["payload"]["reason_code"])
               for e in events}
    assert reasons == {str(c.logical_call_id): ("AuthorizationDenied", reason)
                       for c, reason in expected}
    for denied_call, reason in expected:
        row = await decision(pool, denied_call)
        assert (row["outcome"], row["reason_code"], row["capability"]) == ("denied", reason, None)
        [(kind, told)] = await policy.told(pool, denied_call)
        assert (kind, told["status"], told["reason_code"], told["call_id"]) == (
            "ToolCallSettled", "DENIED", reason, denied_call.provider_call_id)


async def test_approvals_that_may_not_count_are_refused_and_a_valid_one_allows(pool, endpoints, tmp_path):
    run, _ = ids()
    agent = "agent-approver"  # an approver itself (the email rule's approvers include agent-*)
    mail = email(run=run, principal=agent)
    async with running_policy(endpoints, tmp_path) as policy:
        await policy.propose(mail)
        [requested] = await policy.events(1)
        assert requested["event_type"] == "ApprovalRequested"
        assert requested["payload"]["quorum"] == 1
        bad = {
            "approver_is_requester": await policy.approve(mail, agent),
            "approval_for_other_arguments": await policy.approve(mail, "operator:dana",
                                                                 arguments_hash="0" * 64),
            "approval_expired": await policy.approve(mail, "operator:dana",
                                                     expires_at=datetime.now(UTC) - timedelta(seconds=1)),
            "approver_not_allowed": await policy.approve(mail, "finance:a"),  # not the rule's
            "principal_lacks_role": await policy.approve(mail, "intern:bob"),
        }
        for reason, event in bad.items():
            assert await approval_outcome(pool, event) == ("refused", reason)
        assert (await decision(pool, mail))["outcome"] == "awaiting_approval"
        published = await policy.answer(mail, "operator:dana")
        events = await policy.events(2)
    kind, payload = of(events, mail)[-1]
    assert kind == "AuthorizationAllowed"
    allowed = Authorization.model_validate(payload)
    assert [a.approver_id for a in allowed.capability.approvals] == ["operator:dana"]
    assert str(allowed.capability.approvals[0].approval_event_id) == published["event_id"]
    assert refusal(allowed.capability, mail, identities.capability_public_keys(), datetime.now(UTC)) is None
    assert allowed.decision_id == uuid.UUID(requested["payload"]["decision_id"])
    [(kind, told)] = await policy.told(pool, mail)  # awaiting; the settlement is the dispatcher's
    assert (kind, told["approvals_required"]) == ("ToolCallAwaitingApproval", 1)


async def test_a_quorum_of_two_needs_two_different_approvers(pool, endpoints, tmp_path):
    run, agent = ids()
    large = debit("250.00", run=run, principal=agent)
    async with running_policy(endpoints, tmp_path) as policy:
        await policy.propose(large)
        await decision(pool, large, "awaiting_approval")
        first = await policy.approve(large, "operator:dana")
        assert await approval_outcome(pool, first) == ("counted", None)
        again = await policy.approve(large, "operator:dana")
        assert await approval_outcome(pool, again) == ("repeated", "approver_already_counted")
        assert (await decision(pool, large))["outcome"] == "awaiting_approval"
        await policy.approve(large, "finance:eve")
        events = await policy.events(2)
    assert [kind for kind, _ in of(events, large)] == ["ApprovalRequested", "AuthorizationAllowed"]
    chain = Authorization.model_validate(of(events, large)[1][1]).capability.approvals
    assert sorted(a.approver_id for a in chain) == ["finance:eve", "operator:dana"]
    assert (await decision(pool, large))["outcome"] == "allowed"


async def test_one_person_signing_under_two_approver_names_is_one_approval(
        pool, endpoints, tmp_path):
    """finance:a approves, then signs an approval naming finance:b: the second is refused, the
    quorum of two is not reached and nothing is authorized (so nothing can be dispatched)."""
    run, agent = ids()
    large = debit("250.00", run=run, principal=agent)
    async with running_policy(endpoints, tmp_path) as policy:
        await policy.propose(large)
        await decision(pool, large, "awaiting_approval")
        first = await policy.approve(large, "finance:a")
        posing = await policy.approve(large, "finance:b", signed_by="finance:a")
        assert await approval_outcome(pool, first) == ("counted", None)
        assert await approval_outcome(pool, posing) == ("refused", "signature_principal_mismatch")
        assert (await decision(pool, large))["outcome"] == "awaiting_approval"
    assert await pool.fetchval(f"SELECT count(*) FROM {SCHEMA}.outbox WHERE envelope->>"
                               "'event_type' = 'AuthorizationAllowed' AND envelope->'payload'"
                               "->'intent'->>'logical_call_id' = $1",
                               str(large.logical_call_id)) == 0


async def test_unsigned_forged_and_revoked_approvals_count_for_nothing(pool, endpoints, tmp_path):
    """Only a signature that verifies, by a principal whose key is in force, counts; and a
    service may publish for a person only with role publishes-for-people."""
    revoked = tmp_path / "principals.yaml"
    listed = yaml.safe_load(local().principals_file.read_text())
    for entry in listed["principals"]:
        if entry["id"] == "finance:b":
            entry["keys"][0]["revoked_at"] = (datetime.now(UTC) - timedelta(minutes=1)).isoformat()
    revoked.write_text(yaml.safe_dump(listed), encoding="utf-8")
    run, agent = ids()
    large = debit("250.00", run=run, principal=agent)
    async with running_policy(endpoints, tmp_path, principals_file=revoked) as policy:
        await policy.propose(large)
        await decision(pool, large, "awaiting_approval")
        refused = {
            "signature_missing": await policy.approve(large, "finance:a", unsigned=True),
            "signing_key_revoked": await policy.approve(large, "finance:b"),
            "signer_not_publisher_for_people": await policy.approve(
                large, "finance:eve", signed_by="svc:impostor", person="finance:eve"),
            "signature_principal_mismatch": await policy.approve(
                large, "finance:a", signed_by="console", person="finance:eve"),
        }
        for reason, event in refused.items():
            assert await approval_outcome(pool, event) == ("refused", reason)
        assert (await decision(pool, large))["outcome"] == "awaiting_approval"
        by_console = await policy.approve(large, "finance:eve", signed_by="console",
                                          person="finance:eve")
        assert await approval_outcome(pool, by_console) == ("counted", None)
        signed = await policy.approve(large, "finance:a")
        assert await approval_outcome(pool, signed) == ("counted", None)
        events = await policy.events(2)
    chain = Authorization.model_validate(of(events, large)[1][1]).capability.approvals
    assert sorted(a.approver_id for a in chain) == ["finance:a", "finance:eve"]


async def test_a_refusal_by_an_approver_denies_the_call(pool, endpoints, tmp_path):
    run, agent = ids()
    mail = email(run=run, principal=agent)
    async with running_policy(endpoints, tmp_path) as policy:
        await policy.propose(mail)
        await decision(pool, mail, "awaiting_approval")
        await policy.answer(mail, "operator:dana", granted=False)
        events = await policy.events(2)
        late = await policy.approve(mail, "operator:eve")
        assert await approval_outcome(pool, late) == ("refused", "approval_not_pending")
    assert of(events, mail)[-1][0] == "AuthorizationDenied"
    assert of(events, mail)[-1][1]["reason_code"] == "approval_refused"
    assert [(kind, told.get("reason_code")) for kind, told in await policy.told(pool, mail)] == [
        ("ToolCallAwaitingApproval", None), ("ToolCallSettled", "approval_refused")]


async def test_a_request_nobody_answers_is_denied_by_the_sweep(pool, endpoints, tmp_path):
    run, agent = ids()
    refund = call("wallet.refund", {"wallet_id": "w-1", "debit_id": "d-1", "amount": "5",
                                    "currency": "EUR"}, run=run, principal=agent)
    async with running_policy(endpoints, tmp_path, sweep_interval_s=0.2) as policy:
        await policy.propose(refund)
        events = await policy.events(2)
    assert [(kind, p.get("reason_code")) for kind, p in of(events, refund)] == [
        ("ApprovalRequested", None), ("AuthorizationDenied", "approval_request_expired")]
    row = await decision(pool, refund)
    assert (row["outcome"], row["reason_code"], row["version"]) == (
        "denied", "approval_request_expired", 2)
    assert [(kind, told.get("reason_code")) for kind, told in await policy.told(pool, refund)] == [
        ("ToolCallAwaitingApproval", None), ("ToolCallSettled", "approval_request_expired")]


async def test_two_sweepers_deny_each_lapsed_request_once(pool, endpoints, tmp_path):
    run, agent = ids()
    policy_file = tmp_path / "policy.yaml"
    policy_file.write_text(POLICY, encoding="utf-8")
    policy = load_policy(policy_file)
    await record_version(pool, policy)
    lapsed = [email(run=run, principal=agent) for _ in range(5)]
    long_ago = datetime(2000, 1, 1, tzinfo=UTC)  # swept first: other tests' requests stay theirs
    async with pool.acquire() as conn:
        for waiting in lapsed:
            await insert_decision(conn, waiting, None, Verdict(
                uuid.uuid4(), "awaiting_approval", policy.version, "email", None, "waiting",
                {"intent": waiting.model_dump(mode="json")}, long_ago, long_ago,
                approval=ApprovalRule(approvers=("operator:*",))))
    to = Destinations(unique_topic("ledger.authorizations"), unique_topic("agent.results"))
    await create_topic(endpoints.kafka_bootstrap, to.authorizations_topic)
    await asyncio.gather(*(sweep_once(pool, to, len(lapsed)) for _ in range(2)))
    for waiting in lapsed:
        row = await decision(pool, waiting)
        assert (row["outcome"], row["reason_code"], row["version"]) == (
            "denied", "approval_request_expired", 2)
        assert await pool.fetchval(
            f"SELECT count(*) FROM {SCHEMA}.outbox WHERE topic = $1 AND "
            "envelope->'payload'->'intent'->>'logical_call_id' = $2",
            to.authorizations_topic, str(waiting.logical_call_id)) == 1
        assert len(await told(pool, to.results_family, waiting)) == 1  # its agent, once


async def test_a_rate_limit_counts_allowed_calls_over_its_window(pool, endpoints, tmp_path):
    run, agent = ids()

    def reserve(n: int) -> Intent:
        return call("inventory.reserve", {"sku": "s-1", "order_id": f"o-{n}", "quantity": 1},
                    run=run, principal=agent)
    first = [reserve(n) for n in range(3)]
    async with running_policy(endpoints, tmp_path) as policy:
        await policy.propose(*first)
        events = await policy.events(3)
        assert [e["event_type"] for e in events] == ["AuthorizationAllowed"] * 2 + ["AuthorizationDenied"]
        assert events[2]["payload"]["reason_code"] == "rate_limited"
        oldest = (await decision(pool, first[1]))["issued_at"]
        await wait_for(lambda: _after(oldest + timedelta(seconds=3)), timeout=10)
        later = reserve(3)
        await policy.propose(later)
        events = await policy.events(4)
    assert of(events, later)[0][0] == "AuthorizationAllowed"
    windows = json.loads((await decision(pool, later))["inputs"])["limits"]["windows"]
    assert windows[0]["name"] == "reserves-per-agent" and windows[0]["calls_before"] < 2


async def _after(instant: datetime) -> bool:
    return datetime.now(UTC) > instant


async def test_an_edited_policy_is_recorded_then_decides_the_next_call(pool, endpoints, tmp_path):
    run, agent = ids()
    before, after = debit("5.00", run=run, principal=agent), debit("6.00", run=run, principal=agent)
    async with running_policy(endpoints, tmp_path, reload_interval_s=0.1) as policy:
        await policy.propose(before)
        first = await decision(pool, before, "allowed")
        edited = tmp_path / "edited.yaml"
        freeze = f"freeze-{uuid.uuid4().hex[:8]}"  # versions are content hashes: one of its own
        edited.write_text(POLICY.replace("rules:\n", f"rules:\n  - {{name: {freeze}, principals: "
                                         "['*'], tenants: ['*'], tools: [wallet.debit], effect: deny}\n"))
        version = load_policy(edited).version
        edited.replace(policy.settings.policy_file)  # atomically, as a deployment must
        assert await wait_for(lambda: pool.fetchval(
            f"SELECT count(*) FROM {SCHEMA}.policy_versions WHERE version = $1", version), timeout=10)
        await policy.propose(after)
        second = await decision(pool, after, "denied")
    assert first["policy_version"] != version
    assert (second["policy_version"], second["rule"], second["reason_code"]) == (
        version, freeze, "denied_by_rule")


async def test_a_redelivered_or_republished_intent_gets_one_decision(pool, endpoints, tmp_path):
    run, agent = ids()
    once, marker = debit("1.00", run=run, principal=agent), debit("2.00", run=run, principal=agent)
    faults.configure("policy.after_commit=drop@1")
    try:
        async with running_policy(endpoints, tmp_path) as policy:
            await policy.propose(once)
            await decision(pool, once)
            await policy.propose(once, marker)  # the same intent again, in a new envelope
            await decision(pool, marker)
            events = await policy.events(2)  # while its relay runs: decided is not published
    finally:
        faults.configure("")
    assert policy.totals.duplicates >= 1  # the first batch really was delivered again
    assert len(of(events, once)) == 1 and len(events) == 2
    assert await pool.fetchval(f"SELECT count(*) FROM {SCHEMA}.decisions WHERE run_id = $1", run) == 2


async def test_a_poison_record_is_dead_lettered_and_the_consumer_keeps_going(pool, endpoints, tmp_path):
    run, agent = ids()
    good = debit("3.00", run=run, principal=agent)
    not_an_intent = Envelope.new(event_type=PROPOSAL_ACCEPTED, run_id=run, producer="proposal-intake",
                                 payload={"run_id": run, "tool_name": "wallet.debit"})
    async with running_policy(endpoints, tmp_path) as policy:
        producer = AIOKafkaProducer(bootstrap_servers=endpoints.kafka_bootstrap)
        await producer.start()
        try:
            await producer.send_and_wait(policy.settings.intake_topic, b"\xff not json",
                                         key=run.encode())
        finally:
            await producer.stop()
        await publish(endpoints.kafka_bootstrap, policy.settings.intake_topic, not_an_intent)
        await policy.propose(good)
        await decision(pool, good, "allowed")
    reasons = await pool.fetch(f"SELECT reason, event_id FROM {SCHEMA}.dead_letters "
                               "WHERE topic = $1", policy.settings.intake_topic)
    assert len(reasons) == 2
    assert any("does not fit Intent" in r["reason"] and r["event_id"] == not_an_intent.event_id
               for r in reasons)


async def test_an_intent_forged_on_the_approvals_topic_is_dead_lettered_not_decided(
        pool, endpoints, tmp_path):
    """ledger.approvals is public: a ProposalAccepted written there must not reach the policy's
    decision, however well-formed; nor may a record nested too deep to parse stop the topic."""
    run, agent = ids()
    forged, good = debit("4.00", run=run, principal=agent), debit("5.00", run=run, principal=agent)
    envelope = Envelope.new(event_type=PROPOSAL_ACCEPTED, run_id=run, producer="proposal-intake",
                            payload=forged.model_dump(mode="json"))
    async with running_policy(endpoints, tmp_path) as policy:
        await publish(endpoints.kafka_bootstrap, policy.settings.approvals_topic, envelope)
        producer = AIOKafkaProducer(bootstrap_servers=endpoints.kafka_bootstrap)
        await producer.start()
        try:
            await producer.send_and_wait(policy.settings.approvals_topic,
                                         b"[" * 100_000 + b"]" * 100_000, key=run.encode())
        finally:
            await producer.stop()
        await policy.propose(good)
        await decision(pool, good, "allowed")

        async def both_dead_lettered():
            rows = await pool.fetch(f"SELECT reason, event_id FROM {SCHEMA}.dead_letters"
                                    " WHERE topic = $1", policy.settings.approvals_topic)
            return rows if len(rows) == 2 else None

        dead = await wait_for(both_dead_lettered, timeout=30)
        assert dead, "the forged intent and the deep record were not both dead-lettered"
    assert await pool.fetchval(f"SELECT count(*) FROM {SCHEMA}.decisions WHERE logical_call_id = $1",
                               forged.logical_call_id) == 0
    reasons = sorted(row["reason"] for row in dead)
    assert reasons[0].startswith("ProposalAccepted is not accepted on ledger.approvals")
    assert "RecursionError" in reasons[1]


async def test_the_approve_and_reject_commands_answer_only_a_call_awaiting_approval(
        pool, endpoints, tmp_path):
    run, agent = ids()
    mail = email(run=run, principal=agent)
    async with running_policy(endpoints, tmp_path) as policy:
        await policy.propose(mail)
        await decision(pool, mail, "awaiting_approval")
        topic = {"INTENTLEDGER_POLICY_APPROVALS_TOPIC": policy.settings.approvals_topic}
        unsigned = await _cli(endpoints, "approve", str(mail.logical_call_id), "--approver",
                              "operator:dana", **topic)
        assert unsigned.returncode == 2 and "no signing key" in unsigned.stderr
        approved = await _cli(endpoints, "approve", str(mail.logical_call_id), "--approver",
                              "operator:dana", "--ttl-seconds", "60", "--reason", "checked",
                              "--signing-key", str(local().key_file("operator:dana")), **topic)
        assert approved.returncode == 0, approved.stderr
        published = json.loads(approved.stdout)
        assert (published["event_type"], published["payload"]["approver_id"]) == (
            "ApprovalGranted", "operator:dana")
        await decision(pool, mail, "allowed")
    dana = {"INTENTLEDGER_SIGNING_KEY_FILE": str(local().key_file("operator:dana"))}
    unknown = await _cli(endpoints, "approve", str(uuid.uuid4()), "--approver", "operator:dana",
                         **dana)
    assert unknown.returncode == 1 and "has no policy decision" in unknown.stderr
    decided = await _cli(endpoints, "reject", str(mail.logical_call_id), "--approver", "operator:eve",
                         "--signing-key", str(local().key_file("operator:eve")))
    assert decided.returncode == 1 and "not awaiting approval (it is allowed)" in decided.stderr


async def _cli(endpoints: Endpoints, *args: str, **env: str) -> subprocess.CompletedProcess:
    env = {**{name: value for name, value in os.environ.items()
              if not name.startswith("INTENTLEDGER_SIGNING_KEY")},
           "INTENTLEDGER_KAFKA_BOOTSTRAP": endpoints.kafka_bootstrap,
           "INTENTLEDGER_DATABASE_URL": endpoints.database_url, **env}
    return await asyncio.to_thread(subprocess.run, [sys.executable, "-m", "intentledger.cli", *args],
                                   env=env, capture_output=True, text=True, timeout=60)
