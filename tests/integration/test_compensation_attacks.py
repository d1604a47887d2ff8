"""Attacks on compensations, on real Kafka and PostgreSQL. A refund or a release is money or
stock moving like any other effect, so it needs the policy's capability like any other: a
holder of a service's database role cannot make the wallet refund by writing an effect
request into an outbox, nor make the policy authorize a compensation by writing a proposal
there; only the dispatcher's key seals a proposal, and only for the compensation the registry
derives for a call the policy allowed. When the policy refuses a compensation, the saga records
it as failed, and nothing moves."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta

import pytest

from services.dispatcher.compensations import Proposer
from shared.contracts.compensations import COMPENSATION_PROPOSED, CompensationProposal
from shared.contracts.effect_requests import EFFECT_REQUESTED, EffectRequested
from shared.contracts.intake import Intent
from shared.identity.signatures import generate_signing_key
from shared.messaging.envelope import Envelope
from shared.messaging.outbox import OutboxMessage, insert_outbox_rows
from shared.operator.publish import publish
from shared.tools import load_registry
from shared.tools.compensation import compensation_intent
from tests.conftest import ROOT
from tests.support.dispatching import authorize, running
from tests.support import identities
from tests.support.dispatch import (ALLOW_ALL, Stage, accepted, call_row, call_state,
                                    debit_intent, dispatcher_stage, running_policy_on, settled)
from tests.support.kafka import create_topic, read_topic, unique_topic, wait_for
from tests.support.wallet import balance, new_wallet

pytestmark = pytest.mark.infra


@pytest.fixture
async def stage(pool, endpoints, tmp_path) -> Stage:
    async with dispatcher_stage(pool, endpoints, tmp_path) as prepared:
        yield prepared


async def refunds_of(pool, wallet_id: str) -> int:
    return await pool.fetchval("SELECT count(*) FROM wallet.refunds WHERE wallet_id = $1", wallet_id)


async def forge(pool, topic: str, *envelopes: Envelope) -> None:
    """What a holder of the dispatcher's database role can do: rows in its outbox."""
    async with pool.acquire() as conn:
        await insert_outbox_rows(conn, "dispatcher",
                                 [OutboxMessage(topic, envelope) for envelope in envelopes])


async def test_a_refund_forged_into_the_outbox_is_refused_by_the_wallet(stage, pool):
    """Compensations used to be sent without a capability, and the wallet took a refund on the
    dispatcher's word; now it refuses one without the policy's capability."""
    wallet_id = await new_wallet(pool, 10_000)
    debit = debit_intent(wallet_id, 4000)
    replies = unique_topic("effects.receipts.attack")
    await create_topic(stage.endpoints.kafka_bootstrap, replies)
    async with running(stage):
        await authorize(stage, debit)
        assert await settled(pool, debit.logical_call_id) == "SUCCEEDED"
        debit_id = (await call_row(pool, debit.logical_call_id))["result"]
        key = f"acme:forged-refund:{uuid.uuid4().hex}"
        refund = EffectRequested(
            operation_key=key, tool_name="wallet.refund", tool_version="1",
            canonical_arguments={"wallet_id": wallet_id, "debit_id": json.loads(debit_id)["debit_id"],
                                 "amount": 4000, "currency": "EUR"},
            attempt=1, fence=1, tenant_id="acme", logical_call_id=uuid.uuid4(),
            deadline_at=datetime.now(UTC) + timedelta(minutes=5), reply_topic=replies,
            capability=None)
        await forge(pool, stage.wallet_topic, Envelope.new(
            event_type=EFFECT_REQUESTED, run_id=debit.run_id, producer="dispatcher",
            payload=refund.model_dump(mode="json")))
        [record] = await read_topic(stage.endpoints.kafka_bootstrap, replies, until=1, timeout=60)
    receipt = json.loads(record.value)["payload"]
    assert (receipt["status"], receipt["reason"]) == ("rejected", "capability_missing")
    assert await refunds_of(pool, wallet_id) == 0
    assert await balance(pool, wallet_id) == 6000


def _refund_for(original: Intent, **arguments) -> Intent:
    registry = load_registry(ROOT / "config" / "tools.example.yaml")
    debit, refund = registry.get("wallet.debit", "1"), registry.get("wallet.refund", "1")
    intent = compensation_intent(original, {"debit_id": "d-forged"}, refund,
                                 debit.compensation_arguments,
                                 datetime.now(UTC) + timedelta(minutes=10))
    if arguments:
        intent = intent.model_copy(update={
            "canonical_arguments": intent.canonical_arguments | arguments})
    return intent


def proposal(intent: Intent, original: Intent, *, key=None, requested_by="dispatcher") -> Envelope:
    sealed = Proposer(requested_by, key or identities.local().signing_key("dispatcher")).propose(
        intent, original.operation_key)
    return _envelope(sealed)


def _envelope(sealed: CompensationProposal) -> Envelope:
    return Envelope.new(event_type=COMPENSATION_PROPOSED, run_id=sealed.intent.run_id,
                        producer="dispatcher", payload=sealed.model_dump(mode="json"))


async def test_compensation_proposals_forged_into_the_outbox_authorize_nothing(stage, pool):
    """Each forgery is published by the relay and dead-lettered by the policy with why; no
    decision, no capability. The one proposal sealed by the dispatcher's key for the very
    compensation of an allowed call is authorized: the checks refuse forgeries, not traffic."""
    wallet_id = await new_wallet(pool, 10_000)
    original, never_decided = debit_intent(wallet_id, 4000), debit_intent(wallet_id, 4000)
    honest = _refund_for(original)
    console = identities.local().signing_key("console")
    edited = CompensationProposal.model_validate(
        json.loads(proposal(honest, original).model_dump_json())["payload"]).model_copy(
        update={"intent": _refund_for(original, amount=9_000)})
    forgeries = {
        "seal signature_invalid": _envelope(edited),  # sealed, then the amount raised
        "seal key_unknown": proposal(honest, original, key=generate_signing_key("stolen-1")),
        "may not propose compensations": proposal(honest, original, key=console,
                                                   requested_by="console"),
        "sealed by dispatcher, names 'console'": proposal(honest, original, requested_by="console"),
        "amount is not the original's": proposal(_refund_for(original, amount=9_000), original),
        "was not allowed by this policy": proposal(_refund_for(never_decided), never_decided),
    }
    async with running(stage), running_policy_on(stage):  # the relay of each outbox
        await publish(stage.endpoints.kafka_bootstrap, stage.intake, accepted(original))
        assert await wait_for(lambda: pool.fetchval(
            "SELECT outcome FROM policy.decisions WHERE logical_call_id = $1",
            original.logical_call_id), timeout=60) == "allowed"
        await forge(pool, stage.compensations, *forgeries.values())

        async def dead_lettered():
            rows = await pool.fetch("SELECT event_id, reason FROM policy.dead_letters"
                                    " WHERE topic = $1", stage.compensations)
            return rows if len(rows) == len(forgeries) else None
        letters = {row["event_id"]: row["reason"] for row in await wait_for(dead_lettered, 60)}
        await forge(pool, stage.compensations, proposal(honest, original))
        assert await wait_for(lambda: pool.fetchval(
            "SELECT outcome FROM policy.decisions WHERE logical_call_id = $1",
            honest.logical_call_id), timeout=60) == "allowed"
    for expected, envelope in forgeries.items():
        assert expected in letters[envelope.event_id], (expected, letters[envelope.event_id])
    assert await pool.fetchval(
        "SELECT count(*) FROM policy.decisions WHERE run_id = ANY($1)"
        " AND inputs->'intent'->>'compensates' IS NOT NULL",
        [original.run_id, never_decided.run_id]) == 1  # the honest one alone


async def test_a_compensation_the_policy_denies_is_recorded_failed_and_moves_nothing(stage, pool):
    """Debit, then a debit the wallet refuses (more than the balance): the run aborts and the
    first debit's refund is proposed; the policy's rules deny refunds, so the refund is DENIED
    with the policy's reason and the debit ends COMPENSATION_FAILED, its money still taken."""
    wallet_id = await new_wallet(pool, 5_000)
    first = debit_intent(wallet_id, 4000)
    too_much = debit_intent(wallet_id, 90_000, run_id=first.run_id)
    stage.write_policy({"rules": [
        {"name": "no-refunds", "principals": ["*"], "tenants": ["*"], "tools": ["wallet.refund"],
         "effect": "deny"}, *ALLOW_ALL["rules"]]})
    async with running(stage), running_policy_on(stage):
        await publish(stage.endpoints.kafka_bootstrap, stage.intake, accepted(first))
        assert await settled(pool, first.logical_call_id) == "SUCCEEDED"
        await publish(stage.endpoints.kafka_bootstrap, stage.intake, accepted(too_much))
        assert await settled(pool, first.logical_call_id,
                             states=("COMPENSATED", "COMPENSATION_FAILED")) == "COMPENSATION_FAILED"
    refund = await pool.fetchrow("SELECT state, reason, capability FROM dispatcher.calls"
                                 " WHERE compensates = $1", first.logical_call_id)
    assert (refund["state"], refund["reason"]) == ("DENIED", "compensation_not_authorized")
    assert refund["capability"] is None
    assert await call_state(pool, too_much.logical_call_id) == "FAILED"
    assert await refunds_of(pool, wallet_id) == 0
    assert await balance(pool, wallet_id) == 1_000
