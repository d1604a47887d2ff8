"""The whole pipeline with the projection behind it, on real Kafka and PostgreSQL: an agent's
debit goes through the intake, the policy, the dispatcher and the wallet, and the projection's
read models, event history and agent.results announcement agree with what the dispatcher and
the wallet recorded; a call left to a person is resolved, and the run completes with the
operator's evidence in its timeline. Every service runs on this test's topics (the projection's
schema is shared by tests: every assertion is about this test's run)."""

from __future__ import annotations

import json
import uuid

import pytest

from shared.operator.resolve import ResolutionRequest, resolve
from tests.support.identities import signer
from services.projection.replay import replay
from shared import faults
from tests.support.identities import fresh_principal
from tests.support.dispatch import attempts, call_row, settled
from shared.topology import results_topics
from tests.support.kafka import read_topic, topics_matching
from tests.support.pipeline import answer, debit, names, propose
from tests.support.pipeline_stack import POLICY, RESOLUTIONS, pipeline, pipeline_stage, projected
from tests.support.wallet import new_wallet

pytestmark = pytest.mark.infra


@pytest.fixture
async def stage(pool, endpoints, tmp_path):
    yield await pipeline_stage(pool, endpoints, tmp_path)
    faults.configure("")  # the wallet runs in this process; its fault rules must not outlive us


async def test_the_projection_of_a_debit_agrees_with_the_dispatcher_and_the_wallet(stage, pool):
    run_id, tag = names()
    principal = fresh_principal()
    wallet_id = await new_wallet(pool, 10_000)
    async with pipeline(stage):
        await propose(stage, debit(run_id, principal, wallet_id, "40.00", call_id="call-1",
                                   key="order-7"))
        accepted = (await answer(pool, stage, run_id, "call-1"))["payload"]
        call_id = uuid.UUID(accepted["logical_call_id"])
        assert await settled(pool, call_id) == "SUCCEEDED"
        call = await projected(pool, "calls", "logical_call_id", call_id,
                               where=" AND state = 'SUCCEEDED' AND provider_call_id IS NOT NULL")
        effect = await projected(pool, "events", "logical_call_id", call_id,
                                 where=" AND event_type = 'EffectCommitted'")
        run = await projected(pool, "runs", "run_id", run_id, where=" AND status = 'completed'")
        records = await read_topic(stage.endpoints.kafka_bootstrap, stage.results_topic(), until=2)
        family = await topics_matching(stage.endpoints.kafka_bootstrap, results_topics(stage.results))
    dispatcher = await call_row(pool, call_id)
    [attempt] = await attempts(pool, call_id)
    same = ("state", "version", "attempts", "receipt_id", "policy_version", "fence",
            "operation_key", "arguments_hash", "tenant_id", "principal_id")
    assert {name: call[name] for name in same} == {name: dispatcher[name] for name in same}
    assert (call["stage"], call["worker_id"], call["provider_call_id"]) == (
        3, attempt["worker_id"], "call-1")
    assert json.loads(call["result"]) == json.loads(dispatcher["result"])
    audit = ("principal_id", "policy_version", "worker_id", "fence", "attempt", "receipt_id")
    assert {name: effect[name] for name in audit} == {
        "principal_id": principal, "policy_version": dispatcher["policy_version"],
        "worker_id": attempt["worker_id"], "fence": attempt["fence"], "attempt": 1,
        "receipt_id": dispatcher["receipt_id"]}
    assert (run["calls"], run["principal_id"], run["stop_reason"]) == (1, principal, None)
    assert family == [stage.results_topic()]  # the settled result is on acme's topic alone
    # Delivery is at least once: a record may come twice (the relay republishes a batch whose
    # marking failed), its event id once, which is what every consumer deduplicates by.
    told = {e["event_id"]: e for e in (json.loads(r.value) for r in records)}.values()
    [settled_event] = [e for e in told if e["event_type"] == "ToolCallSettled"
                       and e["payload"]["logical_call_id"] == str(call_id)]
    assert {e["run_id"] for e in told} == {run_id}  # nobody else's call announced to this run's agent
    assert {k: settled_event["payload"][k] for k in ("call_id", "status", "receipt_id")} == {
        "call_id": "call-1", "status": "SUCCEEDED", "receipt_id": dispatcher["receipt_id"]}
    verdict = await replay(pool, [run_id])
    assert verdict.agrees, verdict.difference
    assert verdict.replayed_hash == verdict.live_hash and verdict.events >= 6


async def test_a_resolved_call_lets_its_run_complete_with_the_evidence_in_its_timeline(
        stage, pool):
    """The wallet commits and loses every answer, the tool offers no lookup: the call waits in
    MANUAL_REVIEW and the run needs attention. An operator the policy names resolves it with the
    downstream's receipt; the run completes and its timeline shows who and on what evidence."""
    run_id, tag = names()
    wallet_id = await new_wallet(pool, 10_000)
    stage.write_registry(**{"wallet.debit": {"reconciliation": "manual"}})
    stage.write_policy({**POLICY, "resolutions": RESOLUTIONS})
    async with pipeline(stage, wallet={"faults": "wallet.after_commit_drop_response=drop"}):
        await propose(stage, debit(run_id, fresh_principal(), wallet_id, "25.00", call_id="call-r",
                                   key="order-r"))
        call_id = uuid.UUID((await answer(pool, stage, run_id, "call-r"))["payload"]["logical_call_id"])
        assert await settled(pool, call_id) == "MANUAL_REVIEW"
        assert await projected(pool, "runs", "run_id", run_id, where=" AND status = 'needs_attention'")
        recorded = json.loads(await pool.fetchval(
            "SELECT response FROM wallet.idempotency_keys WHERE operation_key = $1",
            (await call_row(pool, call_id))["operation_key"]))
        verdict = await resolve(stage.endpoints, ResolutionRequest(
            call_id, "succeeded", "the wallet's answers were lost",
            f"wallet receipt {recorded['receipt_id']}", recorded["receipt_id"],
            recorded["result"]), topic=stage.resolutions, signer=signer("operator:dana"))
        assert (verdict["status"], verdict["state"]) == ("applied", "SUCCEEDED")
        run = await projected(pool, "runs", "run_id", run_id, where=" AND status = 'completed'")
        resolved = await projected(pool, "events", "logical_call_id", call_id,
                                   where=" AND event_type = 'ToolOutcomeResolved'")
    assert run is not None and resolved is not None
    payload = json.loads(resolved["envelope"])["payload"]
    assert (payload["operator_id"], payload["state"]) == ("operator:dana", "SUCCEEDED")
    assert recorded["receipt_id"] in payload["evidence"]
    assert (await replay(pool, [run_id])).agrees
