"""Attacks on authority after the policy, on real Kafka and PostgreSQL: whoever holds a
service's database role writes into its outbox; whoever holds an old or stolen capability edits
it. The dispatcher dispatches nothing the policy's current keys did not sign, and the wallet
applies nothing its own check of the capability refuses."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta

import pytest

from shared.contracts.effect_requests import EFFECT_REQUESTED, EffectRequested
from shared.messaging.envelope import Envelope
from shared.messaging.outbox import OutboxMessage, insert_outbox_rows
from tests.support.dispatching import authorize, running
from tests.support import identities
from tests.support.capabilities import capability_for
from tests.support.dispatch import (Stage, attempts, call_row, debit_intent, dispatcher_stage,
                                    settled)
from tests.support.kafka import create_topic, read_topic, unique_topic
from tests.support.wallet import balance, debit, debits_under, new_wallet

pytestmark = pytest.mark.infra


@pytest.fixture
async def stage(pool, endpoints, tmp_path) -> Stage:
    async with dispatcher_stage(pool, endpoints, tmp_path) as prepared:
        yield prepared


def forged(key: str, arguments: dict, reply_topic: str, capability) -> Envelope:
    """An effect request as a holder of the dispatcher's database role can write it."""
    payload = EffectRequested(
        operation_key=key, tool_name="wallet.debit", tool_version="1",
        canonical_arguments=arguments, attempt=1, fence=1, tenant_id="acme",
        logical_call_id=uuid.uuid5(uuid.NAMESPACE_URL, key),
        deadline_at=datetime.now(UTC) + timedelta(minutes=5), reply_topic=reply_topic,
        capability=capability)
    return Envelope.new(event_type=EFFECT_REQUESTED, run_id=f"run-{key}", producer="dispatcher",
                        payload=payload.model_dump(mode="json"))


async def test_rows_forged_into_an_outbox_are_published_and_refused_by_the_wallet(stage, pool):
    """Each forgery is published by the relay (it checks nothing) and answered ``rejected`` with
    a stable reason; the key stays unsettled and the balance does not move. The one row whose
    capability the policy really signed is applied: the check refuses forgeries, not traffic."""
    wallet_id = await new_wallet(pool, 10_000)
    replies = unique_topic("effects.receipts.attack")
    await create_topic(stage.endpoints.kafka_bootstrap, replies)
    call = lambda key: uuid.uuid5(uuid.NAMESPACE_URL, key)  # noqa: E731
    keys = {reason: f"acme:forged:{uuid.uuid4().hex}" for reason in (
        "capability_missing", "capability_key_unknown", "capability_signature_invalid",
        "capability_not_for_this_request", "capability_expired", "applied")}
    small, large = debit(wallet_id, 100), debit(wallet_id, 9_000)
    rows = {
        "capability_missing": (large, None),
        "capability_key_unknown": (large, capability_for(
            keys["capability_key_unknown"], "wallet.debit", large,
            call(keys["capability_key_unknown"]),
            key=identities.capability_key(identities.ROTATED_OUT_KID))),
        "capability_signature_invalid": (large, capability_for(
            keys["capability_signature_invalid"], "wallet.debit", small,
            call(keys["capability_signature_invalid"])).model_copy(update={
                "arguments_hash": capability_for("x", "wallet.debit", large,
                                                 uuid.uuid4()).arguments_hash})),
        "capability_not_for_this_request": (large, capability_for(
            keys["capability_not_for_this_request"], "wallet.debit", small,
            call(keys["capability_not_for_this_request"]))),
        "capability_expired": (large, capability_for(
            keys["capability_expired"], "wallet.debit", large, call(keys["capability_expired"]),
            expires_in=timedelta(seconds=-1))),
        "applied": (small, capability_for(keys["applied"], "wallet.debit", small,
                                          call(keys["applied"]))),
    }
    async with pool.acquire() as conn:
        await insert_outbox_rows(conn, "dispatcher", [
            OutboxMessage(stage.wallet_topic, forged(keys[name], arguments, replies, capability))
            for name, (arguments, capability) in rows.items()])
    async with running(stage):
        records = await read_topic(stage.endpoints.kafka_bootstrap, replies, until=len(rows),
                                   timeout=60)
    answered = {receipt["operation_key"]: receipt for receipt in
                (json.loads(record.value)["payload"] for record in records)}
    for name, key in keys.items():
        if name == "applied":
            assert answered[key]["status"] == "applied"
        else:
            assert (answered[key]["status"], answered[key]["reason"]) == ("rejected", name)
            assert await debits_under(pool, key) == 0
            assert await pool.fetchval("SELECT count(*) FROM wallet.idempotency_keys "
                                       "WHERE operation_key = $1", key) == 0  # unsettled
    assert await balance(pool, wallet_id) == 10_000 - 100


async def test_a_capability_signed_by_a_rotated_out_key_is_not_dispatched(stage, pool):
    wallet_id = await new_wallet(pool, 10_000)
    intent = debit_intent(wallet_id, 1000)
    async with running(stage):
        await authorize(stage, intent, key=identities.capability_key(identities.ROTATED_OUT_KID))
        assert await settled(pool, intent.logical_call_id) == "DENIED"
    assert (await call_row(pool, intent.logical_call_id))["reason"] == "capability_key_unknown"
    assert await attempts(pool, intent.logical_call_id) == []
    assert await debits_under(pool, intent.operation_key) == 0
    assert await balance(pool, wallet_id) == 10_000


async def test_a_capability_for_another_tenant_is_not_dispatched(stage, pool):
    wallet_id = await new_wallet(pool, 10_000)
    intent = debit_intent(wallet_id, 1000)
    other_tenant = intent.model_copy(update={"tenant_id": "globex"})
    async with running(stage):
        await authorize(stage, intent, signed_for=other_tenant)
        assert await settled(pool, intent.logical_call_id) == "DENIED"
    assert (await call_row(pool, intent.logical_call_id))["reason"] == \
        "capability_not_for_this_intent"
    assert await attempts(pool, intent.logical_call_id) == []
    assert await balance(pool, wallet_id) == 10_000


async def test_during_a_rotation_both_keys_of_the_set_are_dispatched_and_applied(stage, pool):
    """The dispatcher and the wallet both verify with the set: the outgoing key and the
    incoming one are valid at once, so a rotation drops nothing in flight."""
    wallet_id = await new_wallet(pool, 10_000)
    old, new = debit_intent(wallet_id, 1000), debit_intent(wallet_id, 2000)
    async with running(stage):
        await authorize(stage, old)
        await authorize(stage, new, key=identities.capability_key(identities.ROTATING_KID))
        assert await settled(pool, old.logical_call_id) == "SUCCEEDED"
        assert await settled(pool, new.logical_call_id) == "SUCCEEDED"
    assert await balance(pool, wallet_id) == 10_000 - 3000
