"""The whole pipeline on real Kafka and PostgreSQL: an agent's raw proposal goes through the
intake, the policy and the dispatcher to the reference wallet, every service in this event loop
on this test's topics, one relay publishing all their outboxes. Every test asserts what each
service recorded (intake answers, policy decisions and approvals, dispatcher calls and attempts)
and the business outcome in the wallet's own tables.

Invariant 4 (docs/design.md §5): ``dispatch_count == 0`` means no dispatcher call or attempt and no
debit for that intent. Absence is asserted only once a position proves it would have shown:
the event that could have caused a dispatch is in the next service's inbox."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest

from services.dispatcher.main import run_dispatcher
from services.policy.main import run_policy
from services.proposal_intake.main import run_intake
from shared.db.schemas import migrate_service
from services.relay.main import run_relay
from services.relay.settings import RelaySettings
from shared.config import Settings
from tests.support.identities import fresh_principal
from tests.support.dispatch import (Stage, attempts, call_row, park_other_tests_calls,
                                    running_wallet_on, settled)
from tests.support.kafka import read_topic
from tests.support.pipeline import (answer, approval_outcome, approve, committed_effects, debit,
                                    decision, dispatched_in, intake_event_seen_by_policy, names,
                                    nothing_dispatched, policy_event_seen_by_dispatcher, propose,
                                    rows_of_run)
from tests.support.wallet import balance, debits, debits_under, new_wallet

pytestmark = pytest.mark.infra
SCHEMAS = ("proposal_intake", "policy", "dispatcher", "wallet")
CAPPED = {"effect": "allow", "max_amount_minor": 5000, "currency": "EUR", "over_cap": "deny"}
APPROVED = {"effect": "require_approval",
            "approval": {"quorum": 1, "approvers": ["operator:*"], "ttl_seconds": 600}}


def policy(debit_rule: dict) -> dict:
    """Blocked principals are denied everything; agents' debits follow ``debit_rule``."""
    return {"capability_ttl_seconds": 120, "rules": [
        {"name": "blocked", "principals": ["blocked-*"], "tenants": ["*"], "tools": ["*"],
         "effect": "deny"},
        {"name": "debits", "principals": ["agent-*"], "tenants": ["acme"],
         "tools": ["wallet.debit"], "resource_path": "wallet_id", "resources": ["tenant/acme/*"],
         **debit_rule}]}


@pytest.fixture
async def stage(pool, endpoints, tmp_path) -> Stage:
    for schema in SCHEMAS:
        await migrate_service(pool, schema)
    stage = Stage(tmp_path, endpoints)
    stage.write_registry()
    stage.write_policy(policy(CAPPED))
    await stage.create_topics(pipeline=True)
    await park_other_tests_calls(pool)
    return stage


@asynccontextmanager
async def pipeline(stage: Stage) -> AsyncIterator[None]:
    """Intake, policy, dispatcher, wallet and one relay for all four outboxes."""
    stopping = asyncio.Event()
    settings = Settings(kafka_bootstrap=stage.endpoints.kafka_bootstrap,
                        database_url=stage.endpoints.database_url)
    services = [
        run_relay(settings, RelaySettings(schemas=list(SCHEMAS), poll_interval_s=0.2), stopping),
        run_intake(settings, stage.intake_settings(), stopping),
        run_policy(settings, stage.policy_settings(), stopping),
        run_dispatcher(settings, stage.dispatcher_settings(), stopping)]
    tasks = [asyncio.create_task(service) for service in services]
    try:
        async with running_wallet_on(stage):
            yield
    finally:
        stopping.set()
        await asyncio.gather(*tasks)


async def test_an_agents_debit_is_authorized_applied_once_and_audited(stage, pool):
    run_id, tag = names()
    principal = fresh_principal()
    version = stage.write_policy(policy(CAPPED))  # the fixture's policy: its version
    wallet_id = await new_wallet(pool, 10_000)
    async with pipeline(stage):
        await propose(stage, debit(run_id, principal, wallet_id, "40.00", call_id="call-1",
                                   key="order-7"))
        record, *_ = await read_topic(stage.endpoints.kafka_bootstrap, stage.results_topic(),
                                      until=1)
        accepted = json.loads(record.value)
        call = uuid.UUID(accepted["payload"]["logical_call_id"])
        assert await settled(pool, call) == "SUCCEEDED"
        records = await read_topic(stage.endpoints.kafka_bootstrap, stage.results_topic(),
                                   until=2)
    assert (accepted["event_type"], accepted["payload"]["call_id"]) == (
        "ProposalAccepted", "call-1")
    # No projection runs here: the agent's answer, then its settlement, both reach its topic.
    told = {e["event_id"]: e for e in (json.loads(r.value) for r in records)}.values()
    assert [(e["event_type"], e["producer"], e["payload"]["call_id"]) for e in told] == [
        ("ProposalAccepted", "proposal-intake", "call-1"),
        ("ToolCallSettled", "dispatcher", "call-1")]
    key = accepted["payload"]["operation_key"]
    allowed = await decision(pool, str(call), "allowed")
    assert (allowed["rule"], allowed["policy_version"], allowed["principal_id"]) == (
        "debits", version, principal)
    assert await debits_under(pool, key) == 1 and await balance(pool, wallet_id) == 6000
    row = await call_row(pool, call)
    [attempt] = await attempts(pool, call)
    assert (row["attempts"], row["policy_version"], attempt["status"]) == (1, version, "applied")
    [effect] = await committed_effects(pool, call)
    receipt = await pool.fetchval("SELECT response->>'receipt_id' FROM wallet.idempotency_keys"
                                  " WHERE operation_key = $1", key)
    debit_id = await pool.fetchval("SELECT debit_id FROM wallet.debits WHERE operation_key = $1",
                                   key)
    audit = {"principal_id": principal, "policy_version": version,
             "worker_id": attempt["worker_id"], "fence": attempt["fence"], "attempt": 1,
             "downstream_receipt_id": receipt, "operation_key": key}
    assert {name: effect[name] for name in audit} == audit
    assert receipt == row["receipt_id"] and effect["result"]["debit_id"] == debit_id
    assert effect["canonical_arguments"] == {"wallet_id": wallet_id, "amount": 4000,
                                             "currency": "EUR"}


async def test_one_trace_follows_a_proposal_through_every_service(stage, pool):
    """The agent's traceparent header becomes the trace of everything the proposal causes:
    the intake's, the policy's, the dispatcher's and the wallet's events (docs/design.md §8)."""
    run_id, tag = names()
    trace_id = uuid.uuid4().hex
    stage.write_policy(policy(CAPPED))
    wallet_id = await new_wallet(pool, 10_000)
    async with pipeline(stage):
        await propose(stage, debit(run_id, fresh_principal(), wallet_id, "10.00", call_id="call-t",
                                   key="order-t"), traceparent=f"00-{trace_id}-{'ab' * 8}-01")
        record, *_ = await read_topic(stage.endpoints.kafka_bootstrap, stage.results_topic(),
                                      until=1)
        call = uuid.UUID(json.loads(record.value)["payload"]["logical_call_id"])
        assert await settled(pool, call) == "SUCCEEDED"
    traced = {}
    for schema in ("proposal_intake", "policy", "dispatcher", "wallet"):
        for row in await pool.fetch(f"SELECT envelope->>'event_type' AS type, envelope->>'traceparent'"
                                    f" AS traceparent FROM {schema}.outbox WHERE"
                                    " envelope->>'run_id' = $1", run_id):
            traced[(schema, row["type"])] = (row["traceparent"] or "").split("-")[1:2]
    assert {("proposal_intake", "ProposalAccepted"), ("policy", "AuthorizationAllowed"),
            ("dispatcher", "EffectRequested"), ("wallet", "EffectReceiptIssued"),
            ("dispatcher", "EffectCommitted"), ("dispatcher", "ToolCallSettled")} <= set(traced)
    assert {tuple(ids) for ids in traced.values()} == {(trace_id,)}


async def test_proposals_the_intake_refuses_are_never_dispatched(stage, pool):
    run_id, tag = names()
    principal = fresh_principal()
    paid, invalid, unknown = [await new_wallet(pool, 10_000) for _ in range(3)]
    async with pipeline(stage):
        await propose(
            stage,
            debit(run_id, principal, paid, "10.00", call_id="call-ok", key="k-0"),
            debit(run_id, principal, invalid, "10.00", call_id="call-invalid", key="k-1",
                  arguments={"wallet_id": invalid, "amount": "10.00", "note": "no currency"}),
            debit(run_id, principal, unknown, "10.00", call_id="call-unknown", key="k-2",
                  tool="wallet.teleport"),
            debit(run_id, principal, paid, "99.00", call_id="call-changed", key="k-0"))
        ok = (await answer(pool, stage, run_id, "call-ok"))["payload"]
        assert await settled(pool, uuid.UUID(ok["logical_call_id"])) == "SUCCEEDED"
        refused = {call_id: (await answer(pool, stage, run_id, call_id))
                   for call_id in ("call-invalid", "call-unknown", "call-changed")}
        for call_id in refused:
            await intake_event_seen_by_policy(pool, stage, run_id, call_id)
    assert {call_id: (e["event_type"], e["payload"]["reason_code"])
            for call_id, e in refused.items()} == {
        "call-invalid": ("ProposalRejected", "arguments_invalid"),
        "call-unknown": ("ProposalRejected", "unknown_tool"),
        "call-changed": ("ProposalRejected", "operation_key_conflict")}
    assert await rows_of_run(pool, "proposal_intake.logical_calls", run_id) == 1
    assert await rows_of_run(pool, "policy.decisions", run_id) == 1
    [paid_call] = await dispatched_in(pool, run_id)
    assert str(paid_call) == ok["logical_call_id"] and len(await attempts(pool, paid_call)) == 1
    assert await pool.fetchval("SELECT array_agg(amount_minor) FROM wallet.debits"
                               " WHERE wallet_id = $1", paid) == [1000]  # the original arguments
    assert await balance(pool, paid) == 9000
    for untouched in (invalid, unknown):
        assert (await debits(pool, untouched), await balance(pool, untouched)) == (0, 10_000)


async def test_calls_the_policy_denies_are_never_dispatched(stage, pool):
    blocked_run, tag = names()
    capped_run, _ = names()
    principal = fresh_principal()
    blocked_wallet, capped_wallet = await new_wallet(pool, 10_000), await new_wallet(pool, 10_000)
    async with pipeline(stage):
        await propose(
            stage,
            debit(blocked_run, fresh_principal("blocked"), blocked_wallet, "10.00", call_id="c-1", key="k"),
            debit(capped_run, principal, capped_wallet, "50.01", call_id="c-over", key="over"),
            debit(capped_run, principal, capped_wallet, "50.00", call_id="c-at-cap", key="at-cap"))
        blocked = (await answer(pool, stage, blocked_run, "c-1"))["payload"]
        over = (await answer(pool, stage, capped_run, "c-over"))["payload"]
        at_cap = (await answer(pool, stage, capped_run, "c-at-cap"))["payload"]
        denials = {"blocked": await decision(pool, blocked["logical_call_id"], "denied"),
                   "over": await decision(pool, over["logical_call_id"], "denied")}
        for intent in (blocked, over):
            await policy_event_seen_by_dispatcher(pool, stage, intent["logical_call_id"])
        assert await settled(pool, uuid.UUID(at_cap["logical_call_id"])) == "SUCCEEDED"
    assert {name: (row["rule"], row["reason_code"], row["capability"])
            for name, row in denials.items()} == {"blocked": ("blocked", "denied_by_rule", None),
                                                  "over": ("debits", "amount_over_cap", None)}
    await nothing_dispatched(pool, blocked["logical_call_id"], blocked["operation_key"],
                             blocked_wallet, 10_000)
    assert await dispatched_in(pool, capped_run) == [uuid.UUID(at_cap["logical_call_id"])]
    assert await attempts(pool, uuid.UUID(over["logical_call_id"])) == []
    assert await debits_under(pool, over["operation_key"]) == 0
    assert (await debits(pool, capped_wallet), await balance(pool, capped_wallet)) == (1, 5000)


async def test_a_call_needing_approval_waits_for_a_valid_one_then_is_dispatched_once(stage, pool):
    run_id, tag = names()
    principal = fresh_principal()
    stage.write_policy(policy(APPROVED))
    wallet_id = await new_wallet(pool, 10_000)
    async with pipeline(stage):
        await propose(stage, debit(run_id, principal, wallet_id, "25.00", call_id="c-1", key="k"))
        intent = (await answer(pool, stage, run_id, "c-1"))["payload"]
        call = intent["logical_call_id"]
        await decision(pool, call, "awaiting_approval")
        await policy_event_seen_by_dispatcher(pool, stage, call)  # the ApprovalRequested
        refused = {"approver_is_requester": await approve(stage, intent, principal),
                   "approval_for_other_arguments": await approve(
                       stage, intent, "operator:dana", arguments_hash="0" * 64)}
        for reason, event in refused.items():
            assert await approval_outcome(pool, event) == ("refused", reason)
        assert await pool.fetchval("SELECT outcome FROM policy.decisions WHERE logical_call_id"
                                   " = $1", uuid.UUID(call)) == "awaiting_approval"
        await nothing_dispatched(pool, call, intent["operation_key"], wallet_id, 10_000)
        valid = await approve(stage, intent, "operator:dana")
        assert await approval_outcome(pool, valid) == ("counted", None)
        assert await settled(pool, uuid.UUID(call)) == "SUCCEEDED"
    allowed = await decision(pool, call, "allowed")
    [granted] = json.loads(allowed["capability"])["approvals"]
    assert (granted["approver_id"], granted["approval_event_id"]) == ("operator:dana",
                                                                      str(valid.event_id))
    assert len(await attempts(pool, uuid.UUID(call))) == 1
    assert await debits_under(pool, intent["operation_key"]) == 1
    assert await balance(pool, wallet_id) == 7500


async def test_the_same_proposal_sent_again_is_one_intent_and_one_debit(stage, pool):
    """Sent again while the first is in flight, and again once it has succeeded (an agent
    regenerating its turn after a restart): same key, same arguments, a new provider call id."""
    run_id, tag = names()
    principal = fresh_principal()
    wallet_id = await new_wallet(pool, 10_000)
    first = debit(run_id, principal, wallet_id, "12.50", call_id="call-1", key="order-9")
    async with pipeline(stage):
        await propose(stage, first, first | {"call_id": "call-2"})
        accepted = await answer(pool, stage, run_id, "call-1")
        call = uuid.UUID(accepted["payload"]["logical_call_id"])
        assert await settled(pool, call) == "SUCCEEDED"
        await propose(stage, first | {"call_id": "call-3"})
        again = [await answer(pool, stage, run_id, call_id) for call_id in ("call-2", "call-3")]
        for call_id in ("call-2", "call-3"):
            await intake_event_seen_by_policy(pool, stage, run_id, call_id)
    assert [e["event_type"] for e in (accepted, *again)] == [
        "ProposalAccepted", "DuplicateProposal", "DuplicateProposal"]
    assert {e["payload"]["logical_call_id"] for e in again} == {str(call)}
    for table in ("proposal_intake.logical_calls", "policy.decisions", "dispatcher.calls"):
        assert await rows_of_run(pool, table, run_id) == 1
    assert len(await attempts(pool, call)) == 1
    assert await debits_under(pool, accepted["payload"]["operation_key"]) == 1
    assert (await debits(pool, wallet_id), await balance(pool, wallet_id)) == (1, 8750)
