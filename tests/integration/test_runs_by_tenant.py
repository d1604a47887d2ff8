"""Runs are named by (tenant, run id), through the whole pipeline on real Kafka and PostgreSQL.

The attacks of the finding: tenant globex names acme's run id. Before, its proposal was refused
``run_tenant_mismatch`` (the run exists, and a predictable id can be squatted), and a message
it had refused whole entered the history without a tenant, where acme's timeline showed it
and acme's run row counted it (stop_reason changed). Now globex gets a run of its own, and
acme's record is compared byte for byte before and after.
"""

from __future__ import annotations

import asyncio
import json
import uuid

import pytest
from aiokafka import AIOKafkaProducer

from shared import faults
from shared.identity.signatures import HEADER
from tests.support.dispatch import settled
from tests.support.identities import fresh_principal, signature
from tests.support.kafka import wait_for
from tests.support.pipeline import answer, debit, names, propose
from tests.support.pipeline_stack import POLICY, pipeline, pipeline_stage
from tests.support.query_api import query_api
from tests.support.query_rows import unique
from tests.support.wallet import debits, new_wallet

pytestmark = pytest.mark.infra
ACME, GLOBEX = "acme", "globex"
TWO_TENANTS = {**POLICY, "rules": [*POLICY["rules"], {
    "name": "globex-debits", "principals": ["agent-*"], "tenants": [GLOBEX],
    "tools": ["wallet.debit"], "resource_path": "wallet_id", "resources": ["tenant/globex/*"],
    "effect": "allow"}]}
RECORDS = {  # every row a run owns, per service, read as text so nothing is normalized away
    "proposal_intake.runs": "tenant_id = $1 AND run_id = $2",
    "proposal_intake.logical_calls": "tenant_id = $1 AND run_id = $2",
    "dispatcher.runs": "tenant_id = $1 AND run_id = $2",
    "dispatcher.leases": "tenant_id = $1 AND run_id = $2",
    "dispatcher.calls": "tenant_id = $1 AND run_id = $2",
    "projection.runs": "tenant_id = $1 AND run_id = $2",
    "projection.calls": "tenant_id = $1 AND run_id = $2",
    "projection.events": "tenant_id = $1 AND run_id = $2",
}


@pytest.fixture
async def stage(pool, endpoints, tmp_path):
    stage = await pipeline_stage(pool, endpoints, tmp_path)
    stage.write_policy(TWO_TENANTS)
    yield stage
    faults.configure("")


async def record_of(pool, tenant: str, run_id: str) -> dict[str, list[str]]:
    return {table: sorted(row["r"] for row in await pool.fetch(
        f"SELECT t::text AS r FROM {table} t WHERE {where}", tenant, run_id))
        for table, where in RECORDS.items()}


async def settled_run(pool, stage, tenant: str, run_id: str, principal: str, wallet: str,
                      *call_ids: str) -> list[str]:
    """Propose a debit per call id in ``tenant``'s run and wait until the projection shows the
    run completed with all of them."""
    await propose(stage, *(debit(run_id, principal, wallet, "1.00", call_id=call_id,
                                 key=f"{tenant}-{call_id}", tenant=tenant)
                           for call_id in call_ids))
    return await completed(pool, stage, tenant, run_id, principal, call_ids)


async def completed(pool, stage, tenant, run_id, principal, call_ids) -> list[str]:
    answers = [(await answer(pool, stage, run_id, call_id, tenant=tenant))["payload"]
               for call_id in call_ids]
    assert [(a["outcome"], a["tenant_id"], a["principal_id"]) for a in answers] == [
        ("accepted", tenant, principal)] * len(call_ids), answers
    states = [await settled(pool, uuid.UUID(a["logical_call_id"]), timeout=90) for a in answers]
    assert states == ["SUCCEEDED"] * len(call_ids)

    async def shown():
        return await pool.fetchval("SELECT true FROM projection.runs WHERE tenant_id = $1"
                                   " AND run_id = $2 AND status = 'completed' AND calls = $3",
                                   tenant, run_id, len(call_ids))
    assert await wait_for(shown, timeout=90), f"{tenant}'s run {run_id} never completed"
    await caught_up(pool, stage, run_id)
    return [a["logical_call_id"] for a in answers]


async def caught_up(pool, stage, run_id: str) -> None:
    """Every ledger event of the run id the services wrote is in the projection's history."""
    topics = [stage.intake, stage.authorizations, stage.dispatch, stage.effects]
    written = " UNION ALL ".join(
        f"SELECT (envelope->>'event_id')::uuid AS id FROM {schema}.outbox"
        " WHERE topic = ANY($1::text[]) AND partition_key = $2"
        for schema in ("proposal_intake", "policy", "dispatcher"))

    async def none_missing():
        return await pool.fetchval(f"SELECT count(*) = 0 FROM ({written}) AS o WHERE NOT EXISTS"
                                   " (SELECT 1 FROM projection.events e WHERE e.event_id = o.id)",
                                   topics, run_id) or None
    assert await wait_for(none_missing, timeout=90), f"the history of {run_id} never caught up"


async def test_another_tenants_run_id_is_a_fresh_run_and_leaves_the_owners_record_as_it_was(
        stage, pool):
    run_id, _ = names()
    acme_agent, globex_agent = fresh_principal(), fresh_principal()
    acme_wallet = await new_wallet(pool, 10_000)
    globex_wallet = await new_wallet(pool, 10_000, tenant=GLOBEX)
    async with pipeline(stage):
        await settled_run(pool, stage, ACME, run_id, acme_agent, acme_wallet, "call-1")
        before = await record_of(pool, ACME, run_id)
        # the same run id and the same call id, and a call its intake refuses
        await settled_run(pool, stage, GLOBEX, run_id, globex_agent, globex_wallet, "call-1")
        await propose(stage, debit(run_id, globex_agent, globex_wallet, "1.00", call_id="call-2",
                                   key="refused", tool="wallet.nonexistent", tenant=GLOBEX))
        refused = (await answer(pool, stage, run_id, "call-2", tenant=GLOBEX))["payload"]

        async def counted():
            return await pool.fetchval("SELECT true FROM projection.runs WHERE tenant_id = $1"
                                       " AND run_id = $2 AND rejected_proposals = 1",
                                       GLOBEX, run_id)
        assert await wait_for(counted, timeout=90)
        await caught_up(pool, stage, run_id)
    assert refused["reason_code"] == "unknown_tool"
    assert await record_of(pool, ACME, run_id) == before
    globex_run = await pool.fetchrow("SELECT * FROM proposal_intake.runs WHERE tenant_id = $1"
                                     " AND run_id = $2", GLOBEX, run_id)
    assert (globex_run["principal_id"], globex_run["call_count"]) == (globex_agent, 1)
    assert await pool.fetchval("SELECT stop_reason FROM projection.runs WHERE tenant_id = $1"
                               " AND run_id = $2", GLOBEX, run_id) == "unknown_tool"
    assert await debits(pool, acme_wallet) == await debits(pool, globex_wallet) == 1


async def test_a_message_refused_whole_naming_another_tenants_run_enters_only_the_signers_history(
        stage, pool):
    """globex's agent signs a message whose body names acme and acme's run, and whose
    arguments repeat a key: refused whole. The refusal is recorded under the tenant the
    signature proved, globex, never in acme's timeline nor in acme's run row."""
    run_id, _ = names()
    acme_agent, globex_agent = fresh_principal(), fresh_principal()
    async with pipeline(stage):
        await settled_run(pool, stage, ACME, run_id, acme_agent, await new_wallet(pool, 10_000),
                          "call-1")
        before = await record_of(pool, ACME, run_id)
        value = (f'{{"format": "generic", "run_id": "{run_id}", "principal_id": "{acme_agent}",'
                 f' "tenant_id": "acme", "tool": "wallet.debit", "call_id": "call-9",'
                 f' "arguments": {{"amount": "1.00", "amount": "900.00"}}}}').encode()
        producer = AIOKafkaProducer(bootstrap_servers=stage.endpoints.kafka_bootstrap)
        await producer.start()
        try:
            await producer.send_and_wait(stage.proposals, value, key=run_id.encode(), headers=[
                (HEADER, signature(value, globex_agent, GLOBEX))])
        finally:
            await producer.stop()

        async def recorded():
            return await pool.fetchrow("SELECT * FROM projection.events WHERE run_id = $1"
                                       " AND event_type = 'ProposalRejected'", run_id)
        refusal = await wait_for(recorded, timeout=90)
        await caught_up(pool, stage, run_id)
    assert refusal is not None, "the refusal never reached the history"
    assert refusal["tenant_id"] == GLOBEX
    assert json.loads(refusal["envelope"])["payload"]["reason_code"] == "duplicate_key"
    assert await record_of(pool, ACME, run_id) == before
    assert await pool.fetchval("SELECT stop_reason FROM projection.runs WHERE tenant_id = $1"
                               " AND run_id = $2", ACME, run_id) is None


async def test_two_tenants_racing_in_one_run_id_each_complete_their_own_run_within_its_budget(
        stage, pool):
    """Each run may make five calls; both tenants send five at once, in one run id. One run
    of ten calls would refuse five of them."""
    run_id, _ = names()
    principals = {ACME: fresh_principal(), GLOBEX: fresh_principal()}
    wallets = {ACME: await new_wallet(pool, 10_000),
               GLOBEX: await new_wallet(pool, 10_000, tenant=GLOBEX)}
    call_ids = [f"call-{n}" for n in range(5)]
    async with pipeline(stage):
        await asyncio.gather(*(propose(stage, *(
            debit(run_id, principals[tenant], wallets[tenant], "1.00", call_id=call_id,
                  key=f"{tenant}-{call_id}", tenant=tenant) | {"budget": {"max_calls": 5}}
            for call_id in call_ids)) for tenant in (ACME, GLOBEX)))
        for tenant in (ACME, GLOBEX):
            await completed(pool, stage, tenant, run_id, principals[tenant], call_ids)
    for tenant in (ACME, GLOBEX):
        intake = await pool.fetchrow("SELECT call_count, max_calls FROM proposal_intake.runs"
                                     " WHERE tenant_id = $1 AND run_id = $2", tenant, run_id)
        assert (intake["call_count"], intake["max_calls"]) == (5, 5)
        assert await pool.fetchval("SELECT attempts_used FROM dispatcher.runs WHERE tenant_id = $1"
                                   " AND run_id = $2", tenant, run_id) == 5
        assert await debits(pool, wallets[tenant]) == 5
        assert await pool.fetchval("SELECT count(DISTINCT tenant_id) FROM dispatcher.calls"
                                   " WHERE run_id = $1 AND principal_id = $2", run_id,
                                   principals[tenant]) == 1


async def test_the_query_api_shows_each_tenant_its_own_run_of_a_shared_id(stage, pool, endpoints):
    run_id, _ = names()
    began = await pool.fetchval("SELECT now()")
    acme_agent, globex_agent = fresh_principal(), fresh_principal()
    async with pipeline(stage):
        await settled_run(pool, stage, ACME, run_id, acme_agent, await new_wallet(pool, 10_000),
                          "call-1", "call-2")
        await settled_run(pool, stage, GLOBEX, run_id, globex_agent,
                          await new_wallet(pool, 10_000, tenant=GLOBEX), "call-1")
    acme_key, globex_key, operator = unique("acme"), unique("globex"), unique("ops")
    async with query_api(endpoints, {acme_key: ACME, globex_key: GLOBEX, operator: "*"}) as api:
        status, body = await api.get(f"/v1/runs/{run_id}/timeline", globex_key)
        assert status == 200
        assert {event["tenant_id"] for event in body["items"]} == {GLOBEX}
        assert {event["principal_id"] for event in body["items"]} - {None} == {globex_agent}
        _, run = await api.get(f"/v1/runs/{run_id}", globex_key)
        assert (run["run"]["tenant_id"], run["run"]["calls"], len(run["calls"])) == (GLOBEX, 1, 1)
        _, acme_run = await api.get(f"/v1/runs/{run_id}", acme_key)
        assert (acme_run["run"]["principal_id"], acme_run["run"]["calls"]) == (acme_agent, 2)
        assert (await api.get(f"/v1/runs/{run_id}", globex_key, tenant=ACME))[0] == 404
        for path in (f"/v1/runs/{run_id}", f"/v1/runs/{run_id}/timeline"):
            status, error = await api.get(path, operator)
            assert (status, error["error"]["code"]) == (400, "tenant_required"), path
        _, as_operator = await api.get(f"/v1/runs/{run_id}/timeline", operator, tenant=ACME)
        assert {event["tenant_id"] for event in as_operator["items"]} == {ACME}
        listed = await api.pages("/v1/runs", operator, limit=1,  # keyset: the tenant breaks ties
                                 since=began.isoformat())
        shared = [(run["tenant_id"], run["run_id"]) for page in listed for run in page
                  if run["run_id"] == run_id]
        assert shared == [(ACME, run_id), (GLOBEX, run_id)]
