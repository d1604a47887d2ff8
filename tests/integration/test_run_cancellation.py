"""An operator cancels a run, through the whole pipeline on real Kafka and PostgreSQL.

The protocol: one call of the run is in flight at the wallet when the cancellation arrives,
another waits for a person's approval, and two more are proposed afterwards (one the policy
allows, one that would need approval). The call in flight settles with its truth (one debit,
never assumed failed); the one waiting for approval is denied ``run_cancelled`` by the policy
at once, and an approval given afterwards counts for nothing; of the later two, the allowed
one is refused ``run_cancelled`` by the dispatcher without an attempt, and the other is denied
by the policy instead of waiting for people. The agent is told so for each. Cancellations whose
signature does not prove an operator of the run's tenant change nothing.
"""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime

import asyncpg
import pytest

from shared import faults
from shared.contracts.cancellations import RUN_CANCELLATION_REQUESTED, RunCancellation
from shared.identity.signatures import CANCELLATION, RESOLUTION
from shared.messaging.envelope import Envelope
from shared.operator.cancel import cancel_run, verdict
from shared.operator.publish import publish
from shared.runs import RunKey
from tests.support.dispatch import attempts, settled
from tests.support.identities import fresh_principal, signer
from tests.support.kafka import read_topic, wait_for
from tests.support.pipeline import (answer, approval_outcome, approve, debit, decision,
                                   dispatched, names, propose)
from tests.support.pipeline_stack import pipeline, pipeline_stage, projected
from tests.support.wallet import balance, debits, debits_under, new_wallet

pytestmark = pytest.mark.infra

OPENING = 100_000
POLICY = {"capability_ttl_seconds": 120, "rules": [
    {"name": "debits", "principals": ["agent-*"], "tenants": ["acme"], "tools": ["wallet.debit"],
     "resource_path": "wallet_id", "resources": ["tenant/acme/*"], "effect": "allow",
     "max_amount_minor": 5000, "currency": "EUR", "over_cap": "require_approval",
     "approval": {"quorum": 1, "approvers": ["operator:*"], "ttl_seconds": 600}},
    {"name": "refunds", "principals": ["*"], "tenants": ["acme"], "tools": ["wallet.refund"],
     "effect": "allow"}]}
"""Debits up to 50 EUR go at once; larger ones wait for an operator's approval. Refunds (the
compensations the dispatcher proposes) are allowed."""


@pytest.fixture
async def stage(pool, endpoints, tmp_path):
    stage = await pipeline_stage(pool, endpoints, tmp_path)
    stage.write_policy(POLICY)
    yield stage
    faults.configure("")


async def test_a_cancelled_run_settles_every_call_once_with_its_truth(stage, pool):
    run_id, _ = names()
    principal = fresh_principal()
    wallet_id = await new_wallet(pool, OPENING)
    async with pipeline(stage, wallet={"faults": "wallet.delay=delay:2"}):
        await propose(stage,
                      debit(run_id, principal, wallet_id, "10.00", call_id="in-flight", key="a"),
                      debit(run_id, principal, wallet_id, "80.00", call_id="needs-approval",
                            key="b"))
        in_flight = (await answer(pool, stage, run_id, "in-flight"))["payload"]
        waiting = (await answer(pool, stage, run_id, "needs-approval"))["payload"]
        sent = uuid.UUID(in_flight["logical_call_id"])
        assert await wait_for(lambda: attempts(pool, sent), timeout=60), "never sent"
        await decision(pool, waiting["logical_call_id"], "awaiting_approval")
        assert await debits(pool, wallet_id) == 0  # the wallet is still sitting on the request

        answered = await cancel_run(stage.endpoints, RunKey("acme", run_id),
                                    reason="the customer withdrew the order", compensate=False,
                                    topic=stage.resolutions, signer=signer("operator:dana"))
        assert (answered["status"], answered["reason"]) == ("applied", None)

        assert await settled(pool, sent) == "SUCCEEDED"  # its truth, never assumed failed
        withdrawn = await decision(pool, waiting["logical_call_id"], "denied")
        late_grant = await approve(stage, waiting, "operator:eve")
        await propose(stage,
                      debit(run_id, principal, wallet_id, "5.00", call_id="after", key="c"),
                      debit(run_id, principal, wallet_id, "70.00", call_id="after-big", key="d"))
        after = (await answer(pool, stage, run_id, "after"))["payload"]
        after_big = (await answer(pool, stage, run_id, "after-big"))["payload"]
        assert await settled(pool, uuid.UUID(after["logical_call_id"])) == "DENIED"
        never_asked = await decision(pool, after_big["logical_call_id"], "denied")
        grant_counted = await approval_outcome(pool, late_grant)
        run = await projected(pool, "runs", "run_id", run_id,
                              where=" AND stop_reason = 'run_cancelled'")
        told = await _settled_answers(stage, 4)
    assert run is not None, "the run's projection never said it was cancelled"
    assert (withdrawn["reason_code"], never_asked["reason_code"]) == ("run_cancelled",) * 2
    assert grant_counted == ("refused", "approval_not_pending")
    refused = [uuid.UUID(call["logical_call_id"]) for call in (waiting, after, after_big)]
    assert [await dispatched(pool, call) for call in refused] == [0, 1, 0]
    concluded = await pool.fetchval("SELECT concluded_at FROM dispatcher.cancellations"
                                    " WHERE event_id = $1", uuid.UUID(answered["event_id"]))
    [attempt] = await attempts(pool, sent)
    assert attempt["status"] == "applied" and attempt["finished_at"] > concluded, (
        "the debit was not in flight when the cancellation was applied")
    assert await attempts(pool, refused[1]) == []
    assert await _dispatch_reason(pool, refused[1]) == "run_cancelled"
    assert await debits_under(pool, in_flight["operation_key"]) == 1
    assert (await debits(pool, wallet_id), await balance(pool, wallet_id)) == (1, OPENING - 1000)
    assert told == {"in-flight": ("SUCCEEDED", None),
                    "needs-approval": ("DENIED", "run_cancelled"),
                    "after": ("DENIED", "run_cancelled"),
                    "after-big": ("DENIED", "run_cancelled")}


async def test_a_cancellation_not_proven_by_an_operator_of_the_tenant_changes_nothing(stage, pool):
    """The agent itself, an operator's name with another's key, another tenant's signature, a
    resolution's signature and no signature at all: each is refused with its reason, and the
    run goes on dispatching."""
    run_id, _ = names()
    principal = fresh_principal()
    wallet_id = await new_wallet(pool, OPENING)
    forged = {
        "the run's own agent": dict(operator=principal, signed_by=principal),
        "an operator's name, another operator's key": dict(operator="operator:dana",
                                                          signed_by="operator:eve"),
        "signed for another tenant": dict(operator="operator:dana", signed_by="operator:dana",
                                          tenant_claim="globex"),
        "a signature made for a resolution": dict(operator="operator:dana",
                                                  signed_by="operator:dana", use=RESOLUTION),
        "no signature": dict(operator="operator:dana", signed_by=None),
    }
    async with pipeline(stage):
        await propose(stage, debit(run_id, principal, wallet_id, "1.00", call_id="first", key="a"))
        first = (await answer(pool, stage, run_id, "first"))["payload"]
        assert await settled(pool, uuid.UUID(first["logical_call_id"])) == "SUCCEEDED"
        events = {name: await _cancel_as(stage, run_id, **how) for name, how in forged.items()}
        conn = await asyncpg.connect(stage.endpoints.database_url)
        try:
            verdicts = {name: await verdict(conn, event, timeout_s=60)
                        for name, event in events.items()}
        finally:
            await conn.close()
        await propose(stage, debit(run_id, principal, wallet_id, "2.00", call_id="next", key="b"))
        later = (await answer(pool, stage, run_id, "next"))["payload"]
        assert await settled(pool, uuid.UUID(later["logical_call_id"])) == "SUCCEEDED"
    reasons = {name: (found["status"], (found["reason"] or "").split(":")[0])
               for name, found in verdicts.items()}
    assert reasons == {
        "the run's own agent": ("refused", "principal_lacks_role"),
        "an operator's name, another operator's key": ("refused", "signature_principal_mismatch"),
        "signed for another tenant": ("refused", "signature_tenant_mismatch"),
        "a signature made for a resolution": ("refused", "signature_for_another_use"),
        "no signature": ("refused", "signature_missing")}
    assert await pool.fetchval("SELECT aborted_at FROM dispatcher.runs WHERE tenant_id = 'acme'"
                               " AND run_id = $1", run_id) is None
    assert await balance(pool, wallet_id) == OPENING - 300


async def test_a_run_cancelled_before_any_call_reached_the_dispatcher_sends_nothing(stage, pool):
    """Its calls may still be at the intake or the policy: whenever one arrives, it is refused.
    A second cancellation of a stopped run is refused, and says why."""
    run_id, _ = names()
    principal = fresh_principal()
    wallet_id = await new_wallet(pool, OPENING)
    operator = signer("operator:dana")
    async with pipeline(stage):
        first = await cancel_run(stage.endpoints, RunKey("acme", run_id), reason="runaway agent",
                                 compensate=False, topic=stage.resolutions, signer=operator)
        again = await cancel_run(stage.endpoints, RunKey("acme", run_id), reason="again",
                                 compensate=False, topic=stage.resolutions, signer=operator)
        await propose(stage, debit(run_id, principal, wallet_id, "1.00", call_id="late", key="a"))
        late = (await answer(pool, stage, run_id, "late"))["payload"]
        assert await settled(pool, uuid.UUID(late["logical_call_id"])) == "DENIED"
    assert first["status"] == "applied"
    assert again["status"] == "refused" and again["reason"].startswith("run_already_stopped")
    assert await attempts(pool, uuid.UUID(late["logical_call_id"])) == []
    assert await _dispatch_reason(pool, uuid.UUID(late["logical_call_id"])) == "run_cancelled"
    assert await balance(pool, wallet_id) == OPENING


async def test_a_run_cancelled_with_compensate_gives_back_its_done_steps(stage, pool):
    run_id, _ = names()
    principal = fresh_principal()
    wallet_id = await new_wallet(pool, OPENING)
    async with pipeline(stage):
        await propose(stage, *(debit(run_id, principal, wallet_id, "7.00", call_id=f"c{n}",
                                     key=f"k{n}") for n in range(3)))
        done = [uuid.UUID((await answer(pool, stage, run_id, f"c{n}"))["payload"]
                          ["logical_call_id"]) for n in range(3)]
        assert [await settled(pool, call) for call in done] == ["SUCCEEDED"] * 3
        assert await balance(pool, wallet_id) == OPENING - 2100
        answered = await cancel_run(stage.endpoints, RunKey("acme", run_id),
                                    reason="wrong customer", compensate=True,
                                    topic=stage.resolutions, signer=signer("operator:dana"))
        assert answered["status"] == "applied"
        undone = [await settled(pool, call, timeout=120, states=("COMPENSATED",
                                                                 "COMPENSATION_FAILED"))
                  for call in done]
    assert undone == ["COMPENSATED"] * 3
    assert await balance(pool, wallet_id) == OPENING


async def _cancel_as(stage, run_id: str, *, operator: str, signed_by: str | None,
                     tenant_claim: str = "acme", use: str = CANCELLATION) -> uuid.UUID:
    """A cancellation of ``run_id`` naming ``operator``, signed by ``signed_by``'s key."""
    cancellation = RunCancellation(tenant_id="acme", run_id=run_id, operator_id=operator,
                                   reason="forged", decided_at=datetime.now(UTC))
    envelope = Envelope.new(event_type=RUN_CANCELLATION_REQUESTED, run_id=run_id,
                            producer="test", payload=cancellation.model_dump(mode="json"))
    signature = (signer(signed_by).signature(envelope.value(), tenant_id=tenant_claim, use=use)
                 if signed_by else None)
    await publish(stage.endpoints.kafka_bootstrap, stage.resolutions, envelope,
                  signature=signature)
    return envelope.event_id


async def _dispatch_reason(pool, logical_call_id: uuid.UUID) -> str | None:
    return await pool.fetchval("SELECT reason FROM dispatcher.calls WHERE logical_call_id = $1",
                               logical_call_id)


async def _settled_answers(stage, calls: int) -> dict[str, tuple[str, str | None]]:
    """What the agent was told on its results topic: each call's settled status and reason."""
    records = await read_topic(stage.endpoints.kafka_bootstrap, stage.results_topic(),
                               until=2 * calls)
    told = {}
    for record in records:
        envelope = json.loads(record.value)
        if envelope["event_type"] == "ToolCallSettled":
            payload = envelope["payload"]
            told[payload["call_id"]] = (payload["status"], payload.get("reason_code"))
    return told
