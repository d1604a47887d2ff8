"""Proposal intake end to end on real Kafka and PostgreSQL: an agent without our SDK publishes
raw JSON to agent.proposals and reads accepted, duplicate and rejected outcomes on agent.results."""

import json
from pathlib import Path

import pytest

from services.proposal_intake.formats import to_proposals
from services.proposal_intake.repository import SCHEMA
from shared import faults
from tests.support.intake import answers, generic, ledger, new_run, running_intake, send

pytestmark = pytest.mark.infra
EXAMPLES = Path(__file__).parents[2] / "schemas" / "examples" / "agent.proposals"


def _outcomes(envelopes: list[dict]) -> dict[str, dict]:
    return {e["payload"]["call_id"]: e["payload"] | {"event_type": e["event_type"]} for e in envelopes}


async def _intents(pool, run_id: str) -> int:
    return await pool.fetchval(f"SELECT count(*) FROM {SCHEMA}.logical_calls WHERE run_id = $1", run_id)


async def test_a_generic_proposal_becomes_one_durable_intent_with_canonical_arguments(pool, endpoints):
    run = new_run()
    async with running_intake(endpoints):
        await send(endpoints.kafka_bootstrap, generic(run))
        [answer] = await answers(endpoints.kafka_bootstrap, run, 1)
        [event] = await ledger(endpoints.kafka_bootstrap, run, 1)
    assert answer["event_type"] == "ProposalAccepted"
    assert answer["payload"]["outcome"] == "accepted" and answer["payload"]["call_id"] == "call-1"
    assert event["payload"]["canonical_arguments"] == {
        "wallet_id": "tenant/acme/w-1", "amount": 4000, "currency": "EUR"}
    assert event["payload"]["logical_call_id"] == answer["payload"]["logical_call_id"]
    assert await _intents(pool, run) == 1


async def test_the_same_intent_spelled_differently_is_a_duplicate_not_a_second_intent(pool, endpoints):
    run = new_run()
    first = generic(run, "call-1", arguments={"wallet_id": "w-1", "amount": "40.00", "currency": "EUR"})
    again = generic(run, "call-regenerated", arguments={"currency": "eur", "amount": 40, "wallet_id": "w-1"})
    async with running_intake(endpoints):
        await send(endpoints.kafka_bootstrap, first, again)
        replies = _outcomes(await answers(endpoints.kafka_bootstrap, run, 2))
    assert replies["call-1"]["event_type"] == "ProposalAccepted"
    assert replies["call-regenerated"]["event_type"] == "DuplicateProposal"
    assert replies["call-regenerated"]["logical_call_id"] == replies["call-1"]["logical_call_id"]
    assert replies["call-regenerated"]["state"] == "VALIDATED"
    assert await _intents(pool, run) == 1


async def test_the_same_operation_key_with_other_arguments_is_refused(pool, endpoints):
    run = new_run()
    changed = generic(run, "call-2", arguments={"wallet_id": "w-1", "amount": "41.00", "currency": "EUR"})
    async with running_intake(endpoints):
        await send(endpoints.kafka_bootstrap, generic(run, "call-1"), changed)
        replies = _outcomes(await answers(endpoints.kafka_bootstrap, run, 2))
    assert replies["call-2"]["event_type"] == "ProposalRejected"
    assert replies["call-2"]["reason_code"] == "operation_key_conflict"
    assert await _intents(pool, run) == 1


async def test_openai_anthropic_and_responses_formats_are_answered_per_call_id(pool, endpoints):
    run = new_run()
    base = {"run_id": run, "principal_id": "user-42", "tenant_id": "acme", "tool_version": "1"}
    chat = base | {"format": "openai.chat", "operation_keys": {"call_a": f"{run}:a", "call_b": f"{run}:b"},
                   "message": {"role": "assistant", "content": None, "tool_calls": [
                       {"id": "call_a", "type": "function", "function": {
                           "name": "wallet_debit", "arguments": json.dumps(
                               {"wallet_id": "w-1", "amount": "1.00", "currency": "EUR"})}},
                       {"id": "call_b", "type": "function", "function": {
                           "name": "wallet_debit", "arguments": json.dumps(
                               {"wallet_id": "w-2", "amount": "2.00", "currency": "EUR"})}}]}}
    anthropic = base | {"format": "anthropic", "operation_key": f"{run}:c", "message": {
        "role": "assistant", "stop_reason": "tool_use", "content": [
            {"type": "text", "text": "Debiting now."},
            {"type": "tool_use", "id": "toolu_c", "name": "wallet.debit",
             "input": {"wallet_id": "w-3", "amount": 3, "currency": "EUR"}}]}}
    responses = base | {"format": "openai.responses", "operation_key": f"{run}:d", "output": {
        "type": "function_call", "id": "fc_1", "call_id": "call_d", "name": "wallet_debit",
        "arguments": json.dumps({"wallet_id": "w-4", "amount": "4", "currency": "EUR"}),
        "status": "completed"}}
    async with running_intake(endpoints):
        await send(endpoints.kafka_bootstrap, chat, anthropic, responses)
        replies = _outcomes(await answers(endpoints.kafka_bootstrap, run, 4))
    assert {call: r["event_type"] for call, r in replies.items()} == {
        "call_a": "ProposalAccepted", "call_b": "ProposalAccepted",
        "toolu_c": "ProposalAccepted", "call_d": "ProposalAccepted"}
    assert {r["provider"] for r in replies.values()} == {"openai.chat", "anthropic", "openai.responses"}
    assert await _intents(pool, run) == 4


async def test_refusals_carry_stable_reason_codes_and_poison_is_dead_lettered(pool, endpoints):
    run = new_run()
    async with running_intake(endpoints):
        await send(endpoints.kafka_bootstrap,
                   b"\xff\xfe not utf-8",
                   generic(run, "call-unknown", tool="wallet.teleport"),
                   generic(run, "call-other-tenant", arguments={
                       "wallet_id": "tenant/globex/w-9", "amount": "1", "currency": "EUR"},
                       operation_key="k-2"),
                   generic(run, "call-precision", arguments={
                       "wallet_id": "w-1", "amount": "1.001", "currency": "EUR"}, operation_key="k-3"),
                   generic(run, "call-ok", operation_key="k-4"))
        replies = _outcomes(await answers(endpoints.kafka_bootstrap, run, 4))
    assert {call: r.get("reason_code") for call, r in replies.items()} == {
        "call-unknown": "unknown_tool", "call-other-tenant": "tenant_mismatch",
        "call-precision": "amount_precision", "call-ok": None}
    reasons = await pool.fetch(f"SELECT reason FROM {SCHEMA}.dead_letters WHERE reason LIKE '%not_utf8%'")
    assert reasons, "the undecodable record is dead-lettered with its reason"
    assert await _intents(pool, run) == 1


async def test_a_redelivered_proposal_record_creates_no_second_intent_or_answer(pool, endpoints):
    run = new_run()
    faults.configure("intake.after_commit=drop@1")
    try:
        async with running_intake(endpoints) as intake:
            await send(endpoints.kafka_bootstrap, generic(run), generic(run, "call-2", operation_key="k-2"))
            assert len(await answers(endpoints.kafka_bootstrap, run, 2)) == 2
            replies = await answers(endpoints.kafka_bootstrap, run, 3, timeout=5)  # no third
    finally:
        faults.configure("")
    assert intake.totals.duplicates >= 1  # the batch really was delivered again
    assert sorted(r["payload"]["call_id"] for r in replies) == ["call-1", "call-2"]
    assert await _intents(pool, run) == 2


async def test_hostile_inputs_are_each_refused_or_dead_lettered_and_the_intake_stays_up(pool, endpoints):
    run = new_run()
    nested: dict = {"v": 1}
    for _ in range(200):
        nested = {"n": nested}
    hostile = {
        "oversized": generic(run, "c-big", arguments={"wallet_id": "w", "amount": "1",
                                                      "currency": "EUR", "memo": "x" * 300_000}),
        "deep": generic(run, "c-deep", arguments=nested),
        "huge-int": json.dumps(generic(run, "c-int")).replace('"amount": "40.00"',
                                                              '"amount": ' + "9" * 400).encode(),
        "wrong-type": generic(run, "c-type", arguments={"wallet_id": 7, "amount": "1", "currency": "EUR"}),
        "unknown-field": generic(run, "c-field", surprise=True),
        "not-json": b"{not json",
    }
    # Its tenant is ambiguous, so it is answered on the topic of the tenant it is signed for.
    duplicate_key = json.dumps(generic(run, "c-dup")).replace(
        '"tenant_id": "acme"', '"tenant_id": "globex", "tenant_id": "acme"').encode()
    async with running_intake(endpoints) as intake:
        await send(endpoints.kafka_bootstrap, duplicate_key, signer=("user-42", "acme"))
        await send(endpoints.kafka_bootstrap, *hostile.values(), generic(run, "c-ok", operation_key="ok"))
        replies = _outcomes(await answers(endpoints.kafka_bootstrap, run, 6, timeout=60))
        assert replies.get("c-ok", {}).get("outcome") == "accepted", replies
    assert {call: r["reason_code"] for call, r in replies.items() if call != "c-ok"} == {
        "c-deep": "too_deep", "c-int": "integer_out_of_range", "c-dup": "duplicate_key",
        "c-type": "arguments_invalid", "c-field": "unknown_field"}
    # The oversized record (over the byte limit, never parsed) and non-JSON have no readable
    # run id to answer to: they are dead letters with their reason.
    assert (intake.totals.applied, len(intake.totals.dead_lettered)) == (6, 2), intake.totals
    assert await _intents(pool, run) == 1


async def test_run_budgets_and_deadlines_refuse_further_calls(pool, endpoints):
    run, late = new_run(), new_run()
    budget = {"budget": {"max_calls": 1}}
    async with running_intake(endpoints):
        await send(endpoints.kafka_bootstrap,
                   generic(run, "c1", operation_key="k1", **budget),
                   generic(run, "c2", operation_key="k2", **budget),
                   generic(late, "c3", operation_key="k3", deadline_at="2020-01-01T00:00:00Z"))
        replies = _outcomes(await answers(endpoints.kafka_bootstrap, run, 2))
        [expired] = await answers(endpoints.kafka_bootstrap, late, 1)
    assert (replies["c1"]["outcome"], replies["c2"]["reason_code"]) == ("accepted",
                                                                        "run_call_budget_exhausted")
    assert expired["payload"]["reason_code"] == "run_deadline_passed"
    assert await _intents(pool, run) == 1 and await _intents(pool, late) == 0


async def test_the_published_examples_are_accepted_then_answered_as_duplicates(endpoints):
    """What an agent without our SDK copies from schemas/ works against the example registry.
    A fresh tenant per test keeps the examples' tenant-wide operation keys apart."""
    tenant = f"t-{new_run()[-8:]}"
    messages = [json.loads(path.read_text()) | {"run_id": new_run(), "tenant_id": tenant}
                for path in sorted(EXAMPLES.glob("*.json"))]
    calls = {m["run_id"]: len(to_proposals(m)) for m in messages}
    async with running_intake(endpoints):
        await send(endpoints.kafka_bootstrap, *messages)
        first = {run: await answers(endpoints.kafka_bootstrap, run, n, tenant=tenant)
                 for run, n in calls.items()}
        await send(endpoints.kafka_bootstrap, *messages)
        both = {run: await answers(endpoints.kafka_bootstrap, run, 2 * n, tenant=tenant)
                for run, n in calls.items()}
    assert sum(calls.values()) == 7
    assert [e["payload"]["outcome"] for run in calls for e in first[run]] == ["accepted"] * 7
    again = [e["payload"]["outcome"] for run, n in calls.items() for e in both[run][n:]]
    assert again == ["duplicate"] * 7


async def test_a_message_refused_whole_answers_every_call_it_carries(endpoints):
    run = new_run()
    chat = {"format": "openai.chat", "run_id": run, "principal_id": "user-42", "tenant_id": "acme",
            "operation_keys": {"call_a": f"{run}:a", "call_b": f"{run}:b"},
            "message": {"role": "assistant", "content": None, "tool_calls": [
                {"id": "call_a", "type": "function", "function": {
                    "name": "wallet_debit", "arguments": json.dumps(
                        {"wallet_id": "w-1", "amount": "1.00", "currency": "EUR"})}},
                {"id": "call_b", "type": "function", "function": {
                    "name": "wallet_debit", "arguments": "{not json"}}]}}
    async with running_intake(endpoints):
        await send(endpoints.kafka_bootstrap, chat)
        replies = _outcomes(await answers(endpoints.kafka_bootstrap, run, 2))
    assert {call: r["reason_code"] for call, r in replies.items()} == {
        "call_a": "arguments_not_json", "call_b": "arguments_not_json"}


async def test_a_refused_first_call_does_not_create_or_claim_the_run(pool, endpoints):
    run = new_run()
    async with running_intake(endpoints):
        await send(endpoints.kafka_bootstrap,
                   generic(run, "c-intruder", operation_key="k2", tenant="globex",
                           deadline_at="2020-01-01T00:00:00Z"),
                   generic(run, "c-late", operation_key="k1", deadline_at="2020-01-01T00:00:00Z"),
                   generic(run, "c-ok", operation_key="k3"),
                   generic(run, "c-other-principal", operation_key="k4", principal_id="mallory"))
        replies = _outcomes(await answers(endpoints.kafka_bootstrap, run, 3))
        [intruder] = await answers(endpoints.kafka_bootstrap, run, 1, tenant="globex")
    assert "c-intruder" not in replies  # globex's answer is on globex's topic, not acme's
    replies["c-intruder"] = intruder["payload"]
    assert {call: r["reason_code"] for call, r in replies.items()} == {
        "c-intruder": "run_deadline_passed", "c-late": "run_deadline_passed", "c-ok": None,
        "c-other-principal": "run_principal_mismatch"}
    owner = await pool.fetchrow(f"SELECT tenant_id, principal_id FROM {SCHEMA}.runs WHERE run_id = $1", run)
    assert tuple(owner) == ("acme", "user-42")


async def test_out_of_range_budgets_and_deadlines_are_answered_not_dead_lettered(pool, endpoints):
    run = new_run()
    async with running_intake(endpoints) as intake:
        await send(endpoints.kafka_bootstrap,
                   generic(run, "c-budget", operation_key="k1", budget={"max_calls": 2**31}),
                   generic(run, "c-deadline", operation_key="k2", deadline_at="9999-12-31T23:59:59-01:00"))
        replies = _outcomes(await answers(endpoints.kafka_bootstrap, run, 2))
    assert {r["outcome"] for r in replies.values()} == {"rejected"}
    assert intake.totals.dead_lettered == []


async def test_a_run_cost_budget_counts_the_money_its_calls_move(pool, endpoints):
    run = new_run()
    budget = {"budget": {"cost_limit_minor": 5000, "currency": "EUR"}}

    def debit(call: str, amount: str, currency: str = "EUR") -> dict:
        return generic(run, call, operation_key=call, **budget,
                       arguments={"wallet_id": "w-1", "amount": amount, "currency": currency})

    async with running_intake(endpoints):
        await send(endpoints.kafka_bootstrap, debit("c1", "30.00"), debit("c2", "20.01"),
                   debit("c3", "5", "USD"), debit("c4", "20.00"))
        replies = _outcomes(await answers(endpoints.kafka_bootstrap, run, 4))
    assert {call: r["reason_code"] for call, r in replies.items()} == {
        "c1": None, "c2": "run_cost_budget_exhausted", "c3": "run_cost_currency_mismatch", "c4": None}
    assert await pool.fetchval(f"SELECT cost_spent_minor FROM {SCHEMA}.runs WHERE run_id = $1", run) == 5000


async def test_a_tenants_defaults_bound_runs_that_state_no_limits(pool, endpoints, monkeypatch):
    run, tenant = new_run(), f"t-{new_run()[-8:]}"
    monkeypatch.setenv("INTENTLEDGER_INTAKE_TENANT_LIMITS",
                       json.dumps({tenant: {"max_calls": 1, "run_seconds": 60}}))
    async with running_intake(endpoints):
        await send(endpoints.kafka_bootstrap, generic(run, "c1", operation_key="k1", tenant=tenant),
                   generic(run, "c2", operation_key="k2", tenant=tenant))
        replies = _outcomes(await answers(endpoints.kafka_bootstrap, run, 2, tenant=tenant))
    assert (replies["c1"]["outcome"], replies["c2"]["reason_code"]) == ("accepted",
                                                                        "run_call_budget_exhausted")
    row = await pool.fetchrow(f"SELECT max_calls, deadline_at - created_at AS span FROM {SCHEMA}.runs "
                              "WHERE run_id = $1", run)
    assert row["max_calls"] == 1 and row["span"].total_seconds() < 120


async def test_a_budget_stated_above_the_tenants_limits_gets_the_limits(pool, endpoints,
                                                                        monkeypatch):
    """The finding: with tenant limits of 20 calls / 600 s / 100.00 EUR, a proposal that stated
    its own budget got 100,000 calls, a cost limit of 2^53-1 and a deadline in the year 9999."""
    run, tenant = new_run(), f"t-{new_run()[-8:]}"
    monkeypatch.setenv("INTENTLEDGER_INTAKE_TENANT_LIMITS", json.dumps({tenant: {
        "max_calls": 20, "run_seconds": 600, "cost_limit_minor": 10_000, "currency": "EUR"}}))
    greedy = {"max_calls": 100_000, "max_attempts": 1_000_000, "cost_limit_minor": 2**53 - 1,
              "currency": "EUR"}
    async with running_intake(endpoints):
        await send(endpoints.kafka_bootstrap, generic(run, "c1", operation_key="k1", tenant=tenant,
                                                      budget=greedy,
                                                      deadline_at="9999-01-01T00:00:00Z"))
        replies = _outcomes(await answers(endpoints.kafka_bootstrap, run, 1, tenant=tenant))
    assert replies["c1"]["outcome"] == "accepted"
    row = await pool.fetchrow(f"SELECT max_calls, max_attempts, cost_limit_minor, currency,"
                              f" deadline_at - created_at AS span FROM {SCHEMA}.runs"
                              " WHERE run_id = $1", run)
    assert (row["max_calls"], row["max_attempts"], row["cost_limit_minor"], row["currency"]) == (
        20, 40, 10_000, "EUR")
    assert row["span"].total_seconds() < 700
