"""The dispatcher on real Kafka and PostgreSQL, driving the reference wallet through the Kafka
effect adapter. Every test asserts the business outcome in the wallet's own tables (how many
debits exist) and the dispatcher's records (state, attempts), never a return code."""

from __future__ import annotations

import asyncio
import json
from functools import partial

import pytest
from jsonschema import Draft202012Validator

from services.dispatcher import metrics
from services.dispatcher.metrics import DispatcherMetrics
from services.dispatcher.repository import unresolved
from shared.operator.resolve import ResolutionRequest, resolve
from shared.messaging import lag
from shared.messaging.schema_export import SCHEMAS
from shared.operator.publish import publish
from tests.support.identities import Posing, local, signer
from tests.support.dispatch import (ALLOW_ALL, DENY_DEBITS, Stage, attempts, authorization,
                                    call_row, call_state, debit_intent, dispatcher_stage,
                                    settled)
from tests.support.dispatching import announcements, authorize, running
from tests.support.kafka import wait_for
from tests.support.wallet import balance, debits_under, new_wallet

pytestmark = pytest.mark.infra


@pytest.fixture
async def stage(pool, endpoints, tmp_path) -> Stage:
    async with dispatcher_stage(pool, endpoints, tmp_path) as prepared:
        yield prepared


async def test_an_authorized_debit_is_applied_once_and_recorded(stage, pool):
    wallet_id = await new_wallet(pool, 10_000)
    intent = debit_intent(wallet_id, 4000)
    async with running(stage):
        await authorize(stage, intent)
        assert await settled(pool, intent.logical_call_id) == "SUCCEEDED"
    assert await debits_under(pool, intent.operation_key) == 1
    assert await balance(pool, wallet_id) == 6000
    row = await call_row(pool, intent.logical_call_id)
    assert row["attempts"] == 1 and row["receipt_id"]
    [attempt] = await attempts(pool, intent.logical_call_id)
    assert attempt["status"] == "applied" and attempt["fence"] == row["fence"] >= 1
    # The receipt's answer and the settlement it caused were written by one transaction.
    assert await pool.fetchval(
        "SELECT a.xmin::text = c.xmin::text FROM dispatcher.attempts a JOIN dispatcher.calls c"
        " USING (logical_call_id) WHERE logical_call_id = $1", intent.logical_call_id)
    behind = {where: n for where, n in lag.current("dispatcher").items()
              if where[0] == stage.authorizations}
    assert behind and set(behind.values()) == {0}  # the consumer-lag gauge: caught up
    # The agent is told once, by the transaction that settled the call, with the validated
    # result the dispatcher recorded, in the shape the published schema gives.
    [told] = await announcements(pool, stage, intent.logical_call_id)
    Draft202012Validator(json.loads((SCHEMAS / "agent.results.schema.json").read_text())) \
        .validate(told)
    payload = told["payload"]
    assert (payload["call_id"], payload["status"], payload["receipt_id"], payload["result"]) == (
        intent.provider_call_id, "SUCCEEDED", row["receipt_id"], json.loads(row["result"]))
    assert told["causation_id"] == await pool.fetchval(
        "SELECT envelope->>'event_id' FROM dispatcher.outbox WHERE topic = $1"
        " AND envelope->'payload'->>'logical_call_id' = $2"
        " AND envelope->'payload'->>'state' = 'SUCCEEDED'", stage.dispatch,
        str(intent.logical_call_id))


async def test_a_lost_receipt_is_unknown_then_reconciled_by_lookup(stage, pool):
    """docs/design.md §1: the wallet commits, its answer is lost; the call is UNKNOWN (never FAILED)
    until a lookup by operation key finds the debit. One debit, two attempts.

    Every send's receipt is dropped, not only the first: were the wallet's batch rolled back
    and retried after the drop, the retry would answer and settle the call without it ever
    being unknown. The lookup is answered a second late, so that the unresolved stretch
    outlasts the 100 ms poll (and the lookup's own deadline is far beyond that second). A CI
    run once saw no UNKNOWN state within 60 s; these are the two ways it could have been
    missed."""
    wallet_id = await new_wallet(pool, 10_000)
    intent = debit_intent(wallet_id, 2500)
    counted = DispatcherMetrics()
    faults = "wallet.after_commit_drop_response=drop,wallet.lookup_delay=delay:1"
    async with running(stage, wallet={"faults": faults}, counted=counted, lookup_timeout_s=10.0):
        await authorize(stage, intent)
        unresolved_states = ("UNKNOWN", "RECONCILING")
        assert await settled(pool, intent.logical_call_id, states=unresolved_states)
        async with pool.acquire() as conn:
            backlog, oldest_s = await unresolved(conn)  # what the backlog gauges report
        assert backlog >= 1 and oldest_s >= 0
        assert await settled(pool, intent.logical_call_id) == "SUCCEEDED"
    assert await debits_under(pool, intent.operation_key) == 1
    # UNKNOWN and RECONCILING are the ledger's business: the agent hears of the outcome once.
    assert [e["payload"]["status"] for e in await announcements(
        pool, stage, intent.logical_call_id)] == ["SUCCEEDED"]
    history = await attempts(pool, intent.logical_call_id)
    assert [(a["kind"], a["status"]) for a in history] == [("send", "unknown"), ("lookup", "applied")]
    assert history[1]["started_at"] >= history[0]["deadline_at"]  # no lookup while a send may land
    states = await dispatch_events(pool, intent.logical_call_id)
    assert "ToolOutcomeMarkedUnknown" in states and states[-1] == "ToolEffectReconciled"
    assert counted.retry_amplification == 2.0  # one intent, a send and a lookup
    assert (counted.counts[metrics.OUTCOME_UNKNOWN], counted.counts[metrics.RECONCILED]) == (1, 1)
    assert counted.counts[metrics.IRREVERSIBLE_UNAPPROVED] == 0
    effect = json.loads(await pool.fetchval(
        "SELECT envelope->'payload' FROM dispatcher.outbox WHERE topic LIKE 'ledger.effects%'"
        " AND envelope->'payload'->>'logical_call_id' = $1", str(intent.logical_call_id)))
    assert (effect["attempt"], effect["fence"]) == (1, history[0]["fence"])  # the send that debited


async def test_without_lookup_or_safe_replay_an_unknown_outcome_goes_to_a_person(stage, pool):
    wallet_id = await new_wallet(pool, 10_000)
    stage.write_registry(**{"wallet.debit": {"reconciliation": "manual"}})
    intent = debit_intent(wallet_id, 1000)
    async with running(stage, wallet={"faults": "wallet.after_commit_drop_response=drop"}):
        await authorize(stage, intent)
        assert await settled(pool, intent.logical_call_id) == "MANUAL_REVIEW"
    assert await debits_under(pool, intent.operation_key) == 1  # the first one; zero extra
    assert [a["kind"] for a in await attempts(pool, intent.logical_call_id)] == ["send"]
    row = await call_row(pool, intent.logical_call_id)
    assert row["reason"] == "no_reconciliation_path"


async def test_a_lost_receipt_is_reconciled_by_a_replay_under_the_same_key(stage, pool):
    """A tool whose contract is replay_same_key: the resend under the same key is answered with
    the wallet's recorded receipt (replayed), and the debit is not repeated."""
    wallet_id = await new_wallet(pool, 10_000)
    stage.write_registry(**{"wallet.debit": {"reconciliation": "replay_same_key"}})
    intent = debit_intent(wallet_id, 1200)
    async with running(stage, wallet={"faults": "wallet.after_commit_drop_response=drop@1"}):
        await authorize(stage, intent)
        assert await settled(pool, intent.logical_call_id) == "SUCCEEDED"
    assert await debits_under(pool, intent.operation_key) == 1
    # UNKNOWN and RECONCILING are the ledger's business: the agent hears of the outcome once.
    assert [e["payload"]["status"] for e in await announcements(
        pool, stage, intent.logical_call_id)] == ["SUCCEEDED"]
    history = await attempts(pool, intent.logical_call_id)
    assert [(a["kind"], a["status"]) for a in history] == [("send", "unknown"), ("send", "applied")]
    assert (await call_row(pool, intent.logical_call_id))["state"] == "SUCCEEDED"


async def test_no_replay_once_the_downstream_may_have_forgotten_the_key(stage, pool):
    """The wallet keeps keys for 6 s in this registry; by the time the first attempt has timed
    out, a resend could land after the key is gone and debit again: a person decides instead."""
    wallet_id = await new_wallet(pool, 10_000)
    stage.write_registry(**{"wallet.debit": {"reconciliation": "replay_same_key", "retry": {
        "max_attempts": 4, "attempt_timeout_seconds": 3, "replay_safe": True,
        "key_retention_seconds": 6}}})
    intent = debit_intent(wallet_id, 1300)
    async with running(stage, wallet={"faults": "wallet.after_commit_drop_response=drop"}):
        await authorize(stage, intent)
        assert await settled(pool, intent.logical_call_id) == "MANUAL_REVIEW"
    assert await debits_under(pool, intent.operation_key) == 1
    assert [a["kind"] for a in await attempts(pool, intent.logical_call_id)] == ["send"]
    assert (await call_row(pool, intent.logical_call_id))["reason"] == "downstream_key_expired"


async def test_an_operator_settles_a_call_left_for_a_person_with_evidence(stage, pool):
    """MANUAL_REVIEW leaves only through a resolution the policy allows, signed by the operator
    it names (or by the console for them): the requester's own, a non-operator's, one signed
    by another than it names, a service without publishes-for-people posing for an operator,
    and an operator the rule does not name are refused, the call untouched; the console's
    for operator:dana is applied as ToolOutcomeResolved naming her and her evidence, and the
    effect is on ledger.effects like any other."""
    wallet_id = await new_wallet(pool, 10_000)
    stage.write_registry(**{"wallet.debit": {"reconciliation": "manual"}})
    intent = debit_intent(wallet_id, 1000)
    resolutions = {**ALLOW_ALL, "resolutions": [{"name": "ops", "operators": ["operator:dana"],
                                         "tenants": ["acme"], "tools": ["wallet.*"]}]}
    async with running(stage, wallet={"faults": "wallet.after_commit_drop_response=drop"}):
        await authorize(stage, intent, version=stage.write_policy(resolutions))
        assert await settled(pool, intent.logical_call_id) == "MANUAL_REVIEW"
        recorded = await lookup_receipt(pool, intent.operation_key)
        receipt_id = recorded["receipt_id"]
        resolution = partial(ResolutionRequest, intent.logical_call_id, "succeeded",
                             reason="lookups were off",
                             evidence=f"wallet statement: receipt {receipt_id}", receipt_id=receipt_id,
                             result=recorded["result"])
        refused = {
            "principal_lacks_role": signer(intent.principal_id),  # the requester's own
            "principal_lacks_role ": signer("finance:a"),
            "signature_principal_mismatch": Posing(local().signing_key("finance:a"),
                                                   "finance:a", named="operator:dana"),
            "signer_not_publisher_for_people": signer("svc:impostor", "operator:dana"),
            "repair_not_authorized": signer("operator:eve")}
        for reason, who in refused.items():
            verdict = await resolve(stage.endpoints, resolution(), topic=stage.resolutions,
                                    signer=who)
            assert (verdict["status"], verdict["state"]) == ("refused", "MANUAL_REVIEW")
            assert verdict["reason"].startswith(reason.strip() + ":"), verdict
        applied = await resolve(stage.endpoints, resolution(), topic=stage.resolutions,
                                signer=signer("console", "operator:dana"))
        assert (applied["status"], applied["state"]) == ("applied", "SUCCEEDED")
    assert await debits_under(pool, intent.operation_key) == 1
    [resolved] = await pool.fetch(
        "SELECT envelope->'payload' AS event FROM dispatcher.outbox WHERE topic LIKE 'ledger.dispatch%'"
        " AND envelope->>'event_type' = 'ToolOutcomeResolved'"
        " AND envelope->'payload'->>'logical_call_id' = $1", str(intent.logical_call_id))
    event = json.loads(resolved["event"])
    assert (event["operator_id"], event["state"]) == ("operator:dana", "SUCCEEDED")
    assert receipt_id in event["evidence"]
    effects = await pool.fetchval(
        "SELECT count(*) FROM dispatcher.outbox WHERE topic LIKE 'ledger.effects%'"
        " AND envelope->'payload'->>'logical_call_id' = $1", str(intent.logical_call_id))
    assert effects == 1
    told = [e["payload"] for e in await announcements(pool, stage, intent.logical_call_id)]
    assert [(p["status"], p["receipt_id"]) for p in told] == [("MANUAL_REVIEW", None),
                                                             ("SUCCEEDED", receipt_id)]
    assert told[0]["reason_code"] and told[1]["result"] == recorded["result"]


async def lookup_receipt(pool, operation_key: str) -> dict:
    """What the wallet recorded for the key: what an operator reads off the downstream."""
    return json.loads(await pool.fetchval(
        "SELECT response FROM wallet.idempotency_keys WHERE operation_key = $1", operation_key))


@pytest.mark.parametrize("case", ["expired_capability", "capability_for_other_arguments",
                                  "past_deadline", "policy_changed_to_deny"])
async def test_no_dispatch_without_authority_at_dispatch_time(stage, pool, case):
    wallet_id = await new_wallet(pool, 10_000)
    intent = debit_intent(wallet_id, 1000, deadline_in=0.5 if case == "past_deadline" else 60)
    options = {}
    if case == "expired_capability":
        options["expires_in"] = 0.5
    if case == "capability_for_other_arguments":
        options["signed_for"] = debit_intent(wallet_id, 99_000, run_id=intent.run_id)
    envelope = authorization(intent, stage.write_policy(), **options)  # issued now
    if case == "policy_changed_to_deny":
        stage.write_policy(DENY_DEBITS)
    else:
        await asyncio.sleep(1.0)  # the capability or the deadline lapses while queued
    async with running(stage):
        await publish(stage.endpoints.kafka_bootstrap, stage.authorizations, envelope)
        state = await settled(pool, intent.logical_call_id)
    expected = {"expired_capability": ("DENIED", "capability_expired"),
                "capability_for_other_arguments": ("DENIED", "capability_not_for_this_intent"),
                "past_deadline": ("EXPIRED", "run_deadline_passed"),
                "policy_changed_to_deny": ("DENIED", "policy_changed_to_deny")}[case]
    assert (state, (await call_row(pool, intent.logical_call_id))["reason"]) == expected
    assert [(e["payload"]["status"], e["payload"]["reason_code"]) for e in await announcements(
        pool, stage, intent.logical_call_id)] == [expected]
    assert await attempts(pool, intent.logical_call_id) == []
    assert await debits_under(pool, intent.operation_key) == 0


async def test_a_run_over_its_attempt_budget_dispatches_nothing_more_and_undoes_nothing(
        stage, pool):
    """Out of budget, the run stops; what it already did stands. It used to be aborted as if a
    step had failed, and its applied debits were sent to compensation."""
    wallet_id = await new_wallet(pool, 10_000)
    first = debit_intent(wallet_id, 100, run_max_attempts=1)
    second = debit_intent(wallet_id, 200, run_id=first.run_id, run_max_attempts=1)
    async with running(stage):
        await authorize(stage, first)
        assert await settled(pool, first.logical_call_id) == "SUCCEEDED"
        await authorize(stage, second)
        # the step that denies it would also have requested the first one's compensation
        assert await settled(pool, second.logical_call_id) == "DENIED"
    assert (await call_row(pool, second.logical_call_id))["reason"] == "run_attempt_budget_exhausted"
    assert await debits_under(pool, second.operation_key) == 0
    assert await call_state(pool, first.logical_call_id) == "SUCCEEDED"
    assert await pool.fetchval("SELECT count(*) FROM dispatcher.calls WHERE compensates = $1",
                               first.logical_call_id) == 0
    assert await balance(pool, wallet_id) == 10_000 - 100


async def test_a_redelivered_authorization_dispatches_once(stage, pool):
    wallet_id = await new_wallet(pool, 10_000)
    intent = debit_intent(wallet_id, 700)
    version = stage.write_policy()
    envelope = authorization(intent, version)
    async with running(stage):
        await publish(stage.endpoints.kafka_bootstrap, stage.authorizations, envelope, envelope)
        assert await settled(pool, intent.logical_call_id) == "SUCCEEDED"
    assert await debits_under(pool, intent.operation_key) == 1
    assert len(await attempts(pool, intent.logical_call_id)) == 1
    assert len(await announcements(pool, stage, intent.logical_call_id)) == 1


async def test_a_receipt_does_not_wait_behind_a_backlog_of_authorizations(stage, pool):
    """Under load, new authorizations queue up in front of the dispatcher. A receipt finishes
    a call already sent: queued behind them it would miss its attempt deadline, and an applied
    debit would become UNKNOWN (and, its lookups' answers queued as well, work for a person).
    Receipts have a subscriber of their own. Here every dispatcher batch holds one record and
    takes a second, and twelve authorizations arrive while the first call's debit is in
    flight: the receipt must overtake them."""
    wallet_id = await new_wallet(pool, 1_000_000)
    first, backlog = debit_intent(wallet_id, 100), [debit_intent(wallet_id, 100) for _ in range(12)]
    async with running(stage, batch_size=1, wallet={
            "faults": "wallet.delay=delay:1.5,dispatcher.after_commit=delay:1"}):
        await authorize(stage, first)
        assert await wait_for(lambda: attempts(pool, first.logical_call_id), timeout=60)
        await authorize(stage, *backlog)
        assert await settled(pool, first.logical_call_id) == "SUCCEEDED"
        [attempt] = await attempts(pool, first.logical_call_id)
        assert (attempt["kind"], attempt["status"]) == ("send", "applied")
        recorded_by_then = await pool.fetchval(
            "SELECT count(*) FROM dispatcher.calls WHERE logical_call_id = ANY($1)"
            " AND created_at <= $2", [intent.logical_call_id for intent in backlog],
            attempt["finished_at"])
        assert recorded_by_then < len(backlog), "the receipt overtook the backlog"
    assert await debits_under(pool, first.operation_key) == 1


async def dispatch_events(pool, logical_call_id) -> list[str]:
    """The dispatcher's events for one call, in the order its outbox recorded them."""
    rows = await pool.fetch("SELECT envelope->>'event_type' AS type FROM dispatcher.outbox"
                            " WHERE topic LIKE 'ledger.dispatch%'"
                            " AND envelope->'payload'->>'logical_call_id' = $1 ORDER BY position",
                            str(logical_call_id))
    return [row["type"] for row in rows]
