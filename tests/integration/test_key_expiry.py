"""The ledger's operation keys expire (issue: key retention with explicit expiry), on real Kafka
and PostgreSQL: an intent past its tool's ``ledger_key_retention_seconds`` is reduced to a
tombstone of its key, in bounded batches, and a proposal reusing the key — the agent's late
retry, with the same or other arguments — is refused ``operation_key_expired`` naming the old
intent: never a second intent, never a second effect.

The registry here adds one tool, ``expiry.probe`` (wallet.debit under another name), with a
2-second retention and strips every other tool's, so the expiry this test runs cannot touch
another test's records.
"""

from __future__ import annotations

import uuid
from datetime import timedelta
from pathlib import Path

import pytest
import yaml

from services.proposal_intake.main import run_intake
from services.proposal_intake.repository import SCHEMA, insert_intents
from services.proposal_intake.settings import IntakeSettings
from shared.contracts.intake import Intent
from tests.support.intake import answers, generic, ledger, new_run, send
from tests.support.kafka import wait_for
from tests.support.services import running_service

pytestmark = pytest.mark.infra
ROOT = Path(__file__).resolve().parents[2]
PROBE = "expiry.probe"
RETENTION_S = 2
CALLS = 24
BATCH = 5
"""Fewer than the calls: the expiry must take several bounded batches."""


@pytest.fixture
def registry(tmp_path: Path) -> Path:
    document = yaml.safe_load((ROOT / "config" / "tools.example.yaml").read_text())
    for tool in document["tools"]:
        tool.pop("ledger_key_retention_seconds", None)
    debit = next(tool for tool in document["tools"] if tool["name"] == "wallet.debit")
    document["tools"].append(debit | {"name": PROBE, "aliases": [],
                                      "ledger_key_retention_seconds": RETENTION_S})
    path = tmp_path / "tools.yaml"
    path.write_text(yaml.safe_dump(document))
    return path


def running_expiring_intake(endpoints, registry: Path):
    settings = IntakeSettings(tools_file=registry, key_expiry_interval_s=0.3,
                              key_expiry_batch=BATCH)
    return running_service(endpoints, SCHEMA, lambda shared, stopping: run_intake(
        shared, settings, stopping=stopping))


def _debit(run: str, n: int, amount: str = "1.00", call: str | None = None,
           tool: str = PROBE) -> dict:
    return generic(run, call or f"call-{n}", tool=tool, operation_key=f"order-{n}:debit",
                   arguments={"wallet_id": f"w-{n}", "amount": amount, "currency": "EUR"})


async def test_a_key_past_its_retention_is_refused_never_taken_again(pool, endpoints, registry):
    """Two dozen intents expire in batches of five; every one of them proposed again (the same
    arguments, and one with other arguments) is refused operation_key_expired naming its old
    intent, and no second intent is recorded. A fresh key is still accepted, and a tool without
    a retention keeps its intent."""
    run = new_run()
    bootstrap = endpoints.kafka_bootstrap
    async with running_expiring_intake(endpoints, registry):
        await send(bootstrap, *(_debit(run, n) for n in range(CALLS)),
                   _debit(run, 99, tool="wallet.debit"))
        first = {a["payload"]["call_id"]: a["payload"]
                 for a in await answers(bootstrap, run, CALLS + 1)}
        assert {p["outcome"] for p in first.values()} == {"accepted"}

        async def expired() -> bool:
            return await pool.fetchval(f"SELECT count(*) FROM {SCHEMA}.expired_keys"
                                       " WHERE run_id = $1", run) == CALLS
        assert await wait_for(expired, timeout=30)
        await send(bootstrap, *(_debit(run, n, call=f"again-{n}") for n in range(CALLS)),
                   _debit(run, 0, amount="9.99", call="again-other-arguments"),
                   _debit(run, 1000, call="fresh"))
        replies = {a["payload"]["call_id"]: a["payload"]
                   for a in await answers(bootstrap, run, 2 * CALLS + 3)}
        intake_events = await ledger(bootstrap, run, 2 * CALLS + 3)
    for n in range(CALLS):
        again = replies[f"again-{n}"]
        assert (again["outcome"], again["reason_code"]) == ("rejected", "operation_key_expired")
        assert again["logical_call_id"] == first[f"call-{n}"]["logical_call_id"]
        assert again["operation_key"] == first[f"call-{n}"]["operation_key"]
    other = replies["again-other-arguments"]
    assert (other["reason_code"], other["logical_call_id"]) == (
        "operation_key_expired", first["call-0"]["logical_call_id"])
    assert replies["fresh"]["outcome"] == "accepted"
    accepted = [e for e in intake_events if e["event_type"] == "ProposalAccepted"]
    assert len(accepted) == CALLS + 2, "an expired key became a second intent"
    remaining = await pool.fetch(f"SELECT tool_name FROM {SCHEMA}.logical_calls WHERE run_id = $1"
                                 " ORDER BY tool_name", run)
    assert [r["tool_name"] for r in remaining] == [PROBE, "wallet.debit"]  # fresh; no retention
    tombstone = await pool.fetchrow(f"SELECT * FROM {SCHEMA}.expired_keys WHERE operation_key = $1",
                                    first["call-0"]["operation_key"])
    assert str(tombstone["logical_call_id"]) == first["call-0"]["logical_call_id"]
    assert (tombstone["principal_id"], tombstone["person_id"], tombstone["person_recorded"]) == (
        "user-42", None, True), "the tombstone keeps who proposed it, for no person"
    assert tombstone["expired_at"] - tombstone["proposed_at"] >= timedelta(seconds=RETENTION_S)


async def test_an_expired_key_names_its_intent_to_its_proposer_only(pool, endpoints, registry):
    """Another principal under an expired key is refused ``operation_key_in_use`` and named
    nothing, as under a live one; a tombstone written before tombstones kept their proposer
    (its ``principal_id`` NULL, as migration 0006 leaves them) names its intent to no one."""
    run, legacy_run = new_run(), new_run()
    bootstrap = endpoints.kafka_bootstrap
    async with running_expiring_intake(endpoints, registry):
        await send(bootstrap, _debit(run, 1), _debit(legacy_run, 2))
        [accepted] = await answers(bootstrap, run, 1)

        async def expired() -> bool:
            return await pool.fetchval(f"SELECT count(*) FROM {SCHEMA}.expired_keys"
                                       " WHERE run_id = ANY($1)", [run, legacy_run]) == 2
        assert await wait_for(expired, timeout=30)
        await pool.execute(f"UPDATE {SCHEMA}.expired_keys SET principal_id = NULL"
                           " WHERE run_id = $1", legacy_run)
        await send(bootstrap, _debit(run, 1, call="by-another") | {"principal_id": "mallory"},
                   _debit(run, 1, call="by-its-proposer"),
                   _debit(legacy_run, 2, call="under-a-legacy-tombstone"))
        replies = {a["payload"]["call_id"]: a["payload"]
                   for a in await answers(bootstrap, run, 3) + await answers(
                       bootstrap, legacy_run, 2)}
    assert (replies["by-another"]["reason_code"], replies["by-another"]["logical_call_id"]) == (
        "operation_key_in_use", None)
    assert (replies["by-its-proposer"]["reason_code"],
            replies["by-its-proposer"]["logical_call_id"]) == (
        "operation_key_expired", accepted["payload"]["logical_call_id"])
    legacy = replies["under-a-legacy-tombstone"]
    assert (legacy["reason_code"], legacy["logical_call_id"], legacy["intent_run_id"]) == (
        "operation_key_expired", None, None)


async def test_an_insert_under_an_expired_key_takes_nothing_whatever_was_read(pool):
    """The guard under the read: an intake that read the key before it expired (or a bug that
    never read) still cannot record a second intent under a tombstoned key."""
    run, key = new_run(), f"acme:caller_stated:{uuid.uuid4().hex}"
    async with pool.acquire() as conn:
        await conn.execute(f"INSERT INTO {SCHEMA}.expired_keys (operation_key, logical_call_id,"
                           " tenant_id, run_id, tool_name, proposed_at) VALUES ($1, $2, 'acme',"
                           " $3, $4, now() - interval '1 hour')", key, uuid.uuid4(), run, PROBE)
        await conn.execute(f"INSERT INTO {SCHEMA}.runs (tenant_id, run_id, principal_id,"
                           " deadline_at, max_calls, max_attempts) VALUES ('acme', $1, 'user-42',"
                           " now() + interval '1 hour', 10, 10)", run)
        assert await insert_intents(conn, [_intent(run, key)]) == 0
        assert await conn.fetchval(f"SELECT count(*) FROM {SCHEMA}.logical_calls"
                                   " WHERE operation_key = $1", key) == 0


def _intent(run: str, key: str) -> Intent:
    return Intent.model_validate({
        "logical_call_id": str(uuid.uuid4()), "operation_key": key, "run_id": run,
        "provider": "generic", "provider_call_id": "call-1", "tool_name": PROBE,
        "tool_version": "1", "arguments_hash": "0" * 64,
        "canonical_arguments": {"wallet_id": "w-1"}, "principal_id": "user-42",
        "tenant_id": "acme", "deadline_at": "2030-01-01T00:00:00Z"})
