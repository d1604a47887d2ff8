"""The dispatcher applies consecutive authorizations, and consecutive receipts, of a consumed
batch together, in a constant number of statements. Together must mean exactly what one at a
time meant: a run keeps what its first call set, a redelivered authorization is one call, an
attempt keeps its first answer, a receipt naming another call's key is no answer, and a record
that cannot be applied is dead-lettered alone. The records are published while the dispatcher
is stopped, so that it consumes them in one batch when it starts (the records of one run
share a partition, so their order is the order they were published in)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from types import SimpleNamespace

import pytest

from services.dispatcher.handlers import DispatcherInbox
from services.dispatcher.main import run_dispatcher
from services.dispatcher.repository import SCHEMA
from services.dispatcher.settings import DispatcherSettings
from services.relay.main import run_relay
from services.relay.settings import RelaySettings
from shared.config import Settings
from shared.db.unit_of_work import UnitOfWork
from shared.contracts.effect_requests import EFFECT_RECEIPT_ISSUED, EffectReceipt
from shared.contracts.intake import Intent
from shared.messaging.envelope import Envelope
from shared.operator.publish import publish
from tests.support.dispatch import (Stage, attempts, authorization, call_row, debit_intent,
                                    dispatcher_stage, settled)
from tests.support.dispatching import running
from tests.support.kafka import wait_for
from tests.support.statements import counted
from tests.support.wallet import balance, debits_under, new_wallet

pytestmark = pytest.mark.infra


@pytest.fixture
async def stage(pool, endpoints, tmp_path) -> Stage:
    async with dispatcher_stage(pool, endpoints, tmp_path) as prepared:
        yield prepared


async def test_a_stretch_of_authorizations_is_what_one_at_a_time_was(stage, pool):
    wallet_id = await new_wallet(pool, 10_000)
    run_id = f"run-{uuid.uuid4().hex[:10]}"
    first = debit_intent(wallet_id, 100, run_id=run_id, deadline_in=60, run_max_attempts=7)
    second = debit_intent(wallet_id, 200, run_id=run_id, deadline_in=120, run_max_attempts=9)
    alone = debit_intent(wallet_id, 300)
    version = stage.write_policy()
    await publish(stage.endpoints.kafka_bootstrap, stage.authorizations,
                  authorization(first, version),
                  authorization(first, version),  # the policy's copy, under a new event id
                  authorization(second, version), authorization(alone, version))
    async with running(stage):
        for intent in (first, second, alone):
            assert await settled(pool, intent.logical_call_id) == "SUCCEEDED"
    for intent in (first, second, alone):
        assert await debits_under(pool, intent.operation_key) == 1
        assert len(await attempts(pool, intent.logical_call_id)) == 1
    assert await balance(pool, wallet_id) == 10_000 - 600
    run = await pool.fetchrow("SELECT deadline_at, max_attempts FROM dispatcher.runs"
                              " WHERE tenant_id = 'acme' AND run_id = $1", run_id)
    assert (run["deadline_at"], run["max_attempts"]) == (first.deadline_at, 7)
    created = await pool.fetch("SELECT DISTINCT created_at FROM dispatcher.calls"
                               " WHERE logical_call_id = ANY($1)",
                               [first.logical_call_id, second.logical_call_id])
    assert len(created) == 1, "the run's two calls were recorded in one transaction"


async def test_an_authorization_reusing_another_calls_key_is_dead_lettered_alone(stage, pool):
    wallet_id = await new_wallet(pool, 10_000)
    owner, other = debit_intent(wallet_id, 100), debit_intent(wallet_id, 300)
    clash = debit_intent(wallet_id, 5_000, run_id=owner.run_id).model_copy(
        update={"operation_key": owner.operation_key})  # one run: one partition, in this order
    version = stage.write_policy()
    refused = authorization(clash, version)
    await publish(stage.endpoints.kafka_bootstrap, stage.authorizations,
                  authorization(owner, version), refused, authorization(other, version))
    async with running(stage):
        for intent in (owner, other):
            assert await settled(pool, intent.logical_call_id) == "SUCCEEDED"
    assert await pool.fetchval("SELECT count(*) FROM dispatcher.calls WHERE logical_call_id = $1",
                               clash.logical_call_id) == 0
    assert await debits_under(pool, owner.operation_key) == 1
    assert await balance(pool, wallet_id) == 10_000 - 400
    [reason] = await pool.fetch("SELECT reason FROM dispatcher.dead_letters WHERE event_id = $1",
                                refused.event_id)
    assert "UniqueViolation" in reason["reason"]


@asynccontextmanager
async def dispatcher_alone(stage: Stage) -> AsyncIterator[None]:
    """The dispatcher and its relay, no wallet: its requests wait for receipts this test
    writes."""
    stopping = asyncio.Event()
    settings = Settings(kafka_bootstrap=stage.endpoints.kafka_bootstrap,
                        database_url=stage.endpoints.database_url)
    tasks = [asyncio.create_task(run_relay(settings, RelaySettings(
                 schemas=["dispatcher"], poll_interval_s=0.2), stopping)),
             asyncio.create_task(run_dispatcher(settings, stage.dispatcher_settings(),
                                                stopping))]
    try:
        yield
    finally:
        stopping.set()
        await asyncio.gather(*tasks)


def receipt(intent: Intent, balance_minor: int, *, operation_key: str | None = None) -> Envelope:
    answer = EffectReceipt(operation_key=operation_key or intent.operation_key,
                           logical_call_id=intent.logical_call_id, attempt=1, status="applied",
                           result={"debit_id": f"d-{uuid.uuid4().hex[:8]}",
                                   "balance_minor": balance_minor},
                           receipt_id=uuid.uuid4())
    return Envelope.new(event_type=EFFECT_RECEIPT_ISSUED, run_id=intent.run_id, producer="wallet",
                        payload=answer.model_dump(mode="json"))


async def test_a_stretch_of_receipts_records_each_attempts_first_answer_only(stage, pool):
    stage.write_registry(**{"wallet.debit": {"retry": {
        "max_attempts": 4, "attempt_timeout_seconds": 120, "replay_safe": True,
        "key_retention_seconds": 86400}}})  # the requests wait while the dispatcher restarts
    one, two = debit_intent("tenant/acme/w-one", 100), debit_intent("tenant/acme/w-two", 200)
    version = stage.write_policy()
    async with dispatcher_alone(stage):
        await publish(stage.endpoints.kafka_bootstrap, stage.authorizations,
                      authorization(one, version), authorization(two, version))
        for intent in (one, two):
            assert await wait_for(lambda i=intent: attempts(pool, i.logical_call_id), timeout=60)
    first, copy = receipt(one, 900), receipt(one, 111)
    forged = receipt(two, 222, operation_key=f"acme:caller_stated:{uuid.uuid4().hex}")
    stranger = receipt(debit_intent("tenant/acme/w-none"), 333)
    answer = receipt(two, 800)
    await publish(stage.endpoints.kafka_bootstrap, stage.receipts,
                  first, forged, copy, stranger, answer)
    async with dispatcher_alone(stage):
        for intent in (one, two):
            assert await settled(pool, intent.logical_call_id) == "SUCCEEDED"
    for intent, kept in ((one, first), (two, answer)):
        [attempt] = await attempts(pool, intent.logical_call_id)
        assert attempt["status"] == "applied"
        assert (await call_row(pool, intent.logical_call_id))["receipt_id"] == \
            kept.payload["receipt_id"]
    assert await pool.fetchval(
        "SELECT count(*) FROM dispatcher.dead_letters WHERE event_id = ANY($1)",
        [e.event_id for e in (first, forged, copy, stranger, answer)]) == 0


async def test_a_stretch_takes_as_many_statements_for_one_record_as_for_twenty(stage, pool):
    """Recording authorizations: one statement; answering receipts: one (their calls locked,
    then their attempts). The steps they make due are counted apart (``finishing.py``)."""
    made_due: list[uuid.UUID] = []
    inbox = DispatcherInbox(SimpleNamespace(tool_of=lambda call: None), None,
                            DispatcherSettings(), None,
                            SimpleNamespace(step_before_commit=lambda uow, call: made_due.append(call)))

    async def statements(count: int) -> tuple[int, int]:
        intents = [debit_intent("tenant/acme/w-count", 100) for _ in range(count)]
        async with UnitOfWork(pool, SCHEMA) as uow:
            with counted(uow.connection) as recording:
                await inbox.authorized_all(uow, [authorization(i, "v1") for i in intents])
            with counted(uow.connection) as answering:
                await inbox.answered_all(uow, [receipt(i, 1) for i in intents])
        return len(recording), len(answering)

    await statements(1)  # asyncpg asks for the array types' oids on a connection's first use
    assert await statements(1) == await statements(20) == (1, 1)
    assert len(made_due) == 22
