"""An agent withdraws its own call while it awaits approval, through the MCP gateway's
``tasks/cancel``, in front of the whole pipeline on real Kafka and PostgreSQL; and nobody else's
withdrawal counts: not another agent's, not a forged, expired, misused or misdelegated one,
not one that names another tenant. Asserted on the business outcome: the call's decision, the
policy's record of each withdrawal, the wallet's debits."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest

from services.mcp_gateway.callers import Caller
from services.mcp_gateway.calls import run_for
from shared.contracts.withdrawals import CALL_WITHDRAWAL_REQUESTED, CallWithdrawal
from shared.identity.signatures import PROPOSAL, WITHDRAWAL, sign
from shared.messaging.envelope import Envelope
from shared.operator.publish import publish
from tests.integration.test_mcp_gateway_tasks import OVER_CAP, intake_answer
from tests.support.identities import local
from tests.support.kafka import wait_for
from tests.support.mcp_gateway import (CreatedTask, Tasks, cancel, key_meta, mcp, poll,
                                       running_gateway)
from tests.support.pipeline import approve
from tests.support.pipeline_stack import pipeline, pipeline_stage
from tests.support.wallet import debits, new_wallet

pytestmark = pytest.mark.infra


@pytest.fixture
async def stage(pool, endpoints, tmp_path):
    return await pipeline_stage(pool, endpoints, tmp_path)


@pytest.fixture
async def gateway(stage):
    async with running_gateway(stage, wait_s=3) as gateway:
        yield gateway


async def withdraw(stage, intent: dict, *, names: str, signer: str, tenant: str = "acme",
                   signed_for: str = "acme", use: str = WITHDRAWAL, agent: str | None = None,
                   issued: datetime | None = None) -> uuid.UUID:
    """A withdrawal of the intake's ``intent`` naming ``names``, signed by ``signer``."""
    withdrawal = CallWithdrawal(tenant_id=tenant, run_id=intent["run_id"],
                                logical_call_id=intent["logical_call_id"], principal_id=names,
                                reason="changed my mind", decided_at=datetime.now(UTC))
    envelope = Envelope.new(event_type=CALL_WITHDRAWAL_REQUESTED, run_id=intent["run_id"],
                            producer="test", payload=withdrawal.model_dump(mode="json"))
    await publish(stage.endpoints.kafka_bootstrap, stage.approvals, envelope, signature=sign(
        envelope.value(), local().signing_key(signer), principal_id=signer, tenant_id=signed_for,
        use=use, agent=agent, now=issued))
    return envelope.event_id


async def recorded(pool, event_ids: list[uuid.UUID]) -> dict[uuid.UUID, tuple[str, str | None]]:
    async def all_there():
        rows = await pool.fetch("SELECT event_id, outcome, reason_code FROM policy.withdrawals"
                                " WHERE event_id = ANY($1::uuid[])", event_ids)
        return rows if len(rows) == len(event_ids) else None
    rows = await wait_for(all_there, timeout=60)
    assert rows, "the policy did not record every withdrawal"
    return {row["event_id"]: (row["outcome"], row["reason_code"]) for row in rows}


async def decision(pool, intent: dict) -> tuple[str, str | None]:
    row = await pool.fetchrow(
        "SELECT outcome, reason_code AS reason FROM policy.decisions"
        " WHERE logical_call_id = $1", uuid.UUID(intent["logical_call_id"]))
    return row["outcome"], row["reason"]


async def test_only_the_calls_own_agent_withdraws_it_and_the_task_is_then_cancelled(
        gateway, stage, pool):
    wallet_id = await new_wallet(pool, 10_000)
    key = f"big-{uuid.uuid4().hex[:10]}"
    debit = {"wallet_id": wallet_id, "amount": OVER_CAP, "currency": "EUR"}
    payer, stocker = gateway.payer, gateway.stocker
    async with pipeline(stage), mcp(gateway, gateway.tokens[payer], extensions=[Tasks()]) as client:
        task = await client.session.call_tool("wallet.debit", debit, meta=key_meta(key),
                                               allow_claimed=True)
        assert isinstance(task, CreatedTask) and task.status == "working", task
        intent = await intake_answer(pool, stage, run_for(Caller(payer, "acme"), key))

        attacks = {
            "not_the_proposer": dict(names=stocker, signer=stocker),
            "signature_principal_mismatch": dict(names=payer, signer=stocker),
            "signature_for_another_use": dict(names=payer, signer=payer, use=PROPOSAL),
            "signature_expired": dict(names=payer, signer=payer,
                                      issued=datetime.now(UTC) - timedelta(minutes=10)),
            "signer_not_proposer_for_others": dict(names=payer, signer="svc:impostor",
                                                   agent=payer),
            "signature_tenant_mismatch": dict(names=payer, signer=payer, signed_for="globex"),
            "call_unknown": dict(names="globex-agent", signer="globex-agent", tenant="globex",
                                 signed_for="globex"),
        }
        sent = {code: await withdraw(stage, intent, **attack) for code, attack in attacks.items()}
        found = await recorded(pool, list(sent.values()))
        assert {code: found[event] for code, event in sent.items()} == {
            code: ("refused", code) for code in attacks}
        assert await decision(pool, intent) == ("awaiting_approval", None)
        assert (await poll(client.session, task.task_id)).status == "working"

        assert await cancel(client.session, task.task_id) == {
            "withdrawn": True, "message": "withdrawn: the task is cancelled"}
        assert (await poll(client.session, task.task_id)).status == "cancelled"
        again = await cancel(client.session, task.task_id)
        assert (again["withdrawn"], again["reason_code"]) == (False, "task_ended"), again
        assert "cancelled already" in again["message"]

        approval = await approve(stage, intent, "finance:a")  # too late: nothing is waiting
        refused = await wait_for(lambda: pool.fetchval(
            "SELECT reason_code FROM policy.approvals WHERE approval_event_id = $1",
            approval.event_id), timeout=60)
    assert refused == "approval_not_pending"
    assert await decision(pool, intent) == ("denied", "call_withdrawn")
    assert await pool.fetchval("SELECT count(*) FROM policy.withdrawals WHERE logical_call_id = $1"
                               " AND outcome = 'applied'", uuid.UUID(intent["logical_call_id"])) == 1
    assert await debits(pool, wallet_id) == 0
    assert await pool.fetchval("SELECT count(*) FROM dispatcher.calls WHERE logical_call_id = $1",
                               uuid.UUID(intent["logical_call_id"])) == 0, "nothing dispatched"


async def test_a_withdrawal_after_the_approval_changes_nothing(gateway, stage, pool):
    """Withdrawing is not cancelling an effect: once allowed, the call goes on, debited once."""
    wallet_id = await new_wallet(pool, 10_000)
    key = f"big-{uuid.uuid4().hex[:10]}"
    debit = {"wallet_id": wallet_id, "amount": OVER_CAP, "currency": "EUR"}
    async with pipeline(stage), mcp(gateway, gateway.tokens[gateway.payer],
                                    extensions=[Tasks()]) as client:
        task = await client.session.call_tool("wallet.debit", debit, meta=key_meta(key),
                                               allow_claimed=True)
        intent = await intake_answer(pool, stage, run_for(Caller(gateway.payer, "acme"), key))
        await approve(stage, intent, "finance:a")
        assert await wait_for(lambda: debits(pool, wallet_id), timeout=90) == 1
        late = await withdraw(stage, intent, names=gateway.payer, signer=gateway.payer)
        assert (await recorded(pool, [late]))[late] == ("refused", "call_not_awaiting_approval")
        late_cancel = await cancel(client.session, task.task_id)
        assert (late_cancel["withdrawn"], late_cancel["reason_code"]) == (False, "task_ended")
        assert "completed already" in late_cancel["message"]
    assert await decision(pool, intent) == ("allowed", None)
    assert await debits(pool, wallet_id) == 1
