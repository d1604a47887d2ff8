"""Proposal rates per tenant and per principal, on real Kafka and PostgreSQL: a flood is
refused ``proposal_rate_exceeded`` and records nothing, the budget is shared by racing intake
transactions, and a sender who only claims a tenant cannot spend that tenant's budget."""

from __future__ import annotations

import asyncio
import json

import pytest

from services.proposal_intake import rates
from services.proposal_intake.repository import SCHEMA
from services.proposal_intake.settings import IntakeSettings
from tests.support.intake import answers, generic, ledger, new_run, running_intake, send

pytestmark = pytest.mark.infra


def tenant() -> str:
    return f"t-{new_run()[-8:]}"


def limits(monkeypatch, tenant_id: str, **own) -> None:
    monkeypatch.setenv("INTENTLEDGER_INTAKE_TENANT_LIMITS", json.dumps({tenant_id: own}))


def calls(run: str, tenant_id: str, names: list[str], principal: str = "user-42") -> list[dict]:
    """One generic message per call (the generic format carries one call)."""
    return [generic(run, name, operation_key=name, tenant=tenant_id, principal_id=principal)
            for name in names]


def by_call(envelopes: list[dict]) -> dict[str, dict]:
    return {e["payload"]["call_id"]: e["payload"] for e in envelopes}


async def intents(pool, run: str) -> int:
    return await pool.fetchval(f"SELECT count(*) FROM {SCHEMA}.logical_calls WHERE run_id = $1", run)


async def test_a_principal_past_its_burst_is_refused_with_when_to_retry_and_nothing_recorded(
        pool, endpoints, monkeypatch):
    t, run = tenant(), new_run()
    limits(monkeypatch, t, principal_calls_per_second=0.5, principal_calls_burst=5)
    names = [f"c{n}" for n in range(8)]
    async with running_intake(endpoints):
        await send(endpoints.kafka_bootstrap, *calls(run, t, names))
        replies = by_call(await answers(endpoints.kafka_bootstrap, run, len(names), tenant=t))
        refused = [name for name in names if replies[name]["outcome"] == "rejected"]
        assert [replies[name]["outcome"] for name in names[:5]] == ["accepted"] * 5
        assert refused == names[5:]
        for name in refused:
            assert replies[name]["reason_code"] == "proposal_rate_exceeded"
            assert 0 < replies[name]["retry_after_s"] <= 2.0
            assert "principal" in replies[name]["message"]
        assert await intents(pool, run) == 5
        # Waiting as told, the same message is served.
        await asyncio.sleep(replies["c5"]["retry_after_s"] + 0.2)
        await send(endpoints.kafka_bootstrap, *calls(run, t, ["c5"]))
        again = [e for e in await answers(endpoints.kafka_bootstrap, run, len(names) + 1,
                                                   tenant=t)
                 if e["payload"]["call_id"] == "c5"]
        # The history never heard of the refusals: had c5's been recorded, it would come
        # before c5's acceptance, among these six.
        history = await ledger(endpoints.kafka_bootstrap, run, 6)
    assert [e["payload"]["outcome"] for e in again] == ["rejected", "accepted"]
    assert await intents(pool, run) == 6
    assert [(e["event_type"], e["payload"]["provider_call_id"]) for e in history] == [
        ("ProposalAccepted", name) for name in names[:6]]


async def test_the_tenant_budget_is_shared_by_its_principals_and_no_other_tenant_feels_it(
        pool, endpoints, monkeypatch):
    t, other, run_a, run_b, run_c = tenant(), tenant(), new_run(), new_run(), new_run()
    monkeypatch.setenv("INTENTLEDGER_INTAKE_TENANT_LIMITS", json.dumps({
        t: {"calls_per_second": 0.1, "calls_burst": 6}, other: {"calls_per_second": 0.1,
                                                              "calls_burst": 6}}))
    async with running_intake(endpoints):
        await send(endpoints.kafka_bootstrap, *calls(run_a, t, ["a1", "a2", "a3", "a4"], "user-42"))
        first = by_call(await answers(endpoints.kafka_bootstrap, run_a, 4, tenant=t))
        await send(endpoints.kafka_bootstrap, *calls(run_b, t, ["b1", "b2", "b3"], "u-1"),
                   *calls(run_c, other, ["o1", "o2", "o3"], "u-1"))
        second = by_call(await answers(endpoints.kafka_bootstrap, run_b, 3, tenant=t))
        third = by_call(await answers(endpoints.kafka_bootstrap, run_c, 3, tenant=other))
    assert {reply["outcome"] for reply in first.values()} == {"accepted"}
    assert [second[name]["outcome"] for name in ("b1", "b2", "b3")] == ["accepted", "accepted",
                                                                       "rejected"]
    assert "tenant" in second["b3"]["message"]
    assert {reply["outcome"] for reply in third.values()} == {"accepted"}


async def test_a_message_larger_than_the_burst_is_told_to_split_not_to_wait(pool, endpoints,
                                                                             monkeypatch):
    t, run = tenant(), new_run()
    limits(monkeypatch, t, principal_calls_burst=2)
    message = {"format": "openai.chat", "run_id": run, "principal_id": "user-42", "tenant_id": t,
               "tool_version": "1",
               "operation_keys": {f"x{n}": f"{run}:x{n}" for n in range(3)},
               "message": {"role": "assistant", "tool_calls": [
                   {"id": f"x{n}", "type": "function", "function": {
                       "name": "wallet_debit", "arguments": json.dumps(
                           {"wallet_id": "w-1", "amount": "1.00", "currency": "EUR"})}}
                   for n in range(3)]}}
    async with running_intake(endpoints):
        await send(endpoints.kafka_bootstrap, message)
        replies = by_call(await answers(endpoints.kafka_bootstrap, run, 3, tenant=t))
    assert {r["reason_code"] for r in replies.values()} == {"proposal_rate_exceeded"}
    assert {r["retry_after_s"] for r in replies.values()} == {None}
    assert "smaller messages" in replies["x0"]["message"]
    assert await intents(pool, run) == 0


async def test_records_that_only_claim_a_tenant_spend_nothing_of_its_budget(
        pool, endpoints, monkeypatch):
    """The attack: flood unsigned and wrongly signed records that name the victim tenant and
    principal, then the victim's own agent proposes: it is served in full."""
    t, forged_run, run = tenant(), new_run(), new_run()
    limits(monkeypatch, t, principal_calls_burst=3, calls_burst=3)
    async with running_intake(endpoints):
        forged = calls(forged_run, t, [f"f{n}" for n in range(6)])
        await send(endpoints.kafka_bootstrap, *forged, signed=False)
        await send(endpoints.kafka_bootstrap, *forged, signer=("mallory", t))
        refusals = await answers(endpoints.kafka_bootstrap, forged_run, 12, tenant=t)
        await send(endpoints.kafka_bootstrap, *calls(run, t, ["v1", "v2", "v3"]))
        served = by_call(await answers(endpoints.kafka_bootstrap, run, 3, tenant=t))
    assert {e["payload"]["reason_code"] for e in refusals} == {
        "signature_missing", "signature_principal_mismatch"}
    assert {reply["outcome"] for reply in served.values()} == {"accepted"}


async def test_racing_intake_transactions_never_spend_more_than_the_bucket_holds(pool):
    """Forty messages of one call each, spent from two bucket rows by ten transactions at once
    (as intake replicas on other partitions would): exactly the burst is granted."""
    t = tenant()
    settings = IntakeSettings(tenant_limits={t: {"calls_per_second": 0.001, "calls_burst": 17,
                                                 "principal_calls_per_second": 0.001,
                                                 "principal_calls_burst": 25}})
    barrier = asyncio.Barrier(10)

    async def worker() -> int:
        granted = 0
        async with pool.acquire() as conn:
            await barrier.wait()
            for _ in range(4):
                async with conn.transaction():
                    granted += await rates.spend(conn, t, "user-42", 1, settings) is None
        return granted

    assert sum(await asyncio.gather(*(worker() for _ in range(10)))) == 17
