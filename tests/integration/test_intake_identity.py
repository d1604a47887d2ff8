"""Who a proposal is from, attacked end to end on real Kafka and PostgreSQL: the intake believes
the signature over a record's exact bytes, never its body. Every refused record is answered
with its reason code and leaves zero intents, so nothing downstream can dispatch it."""

import asyncio
import json
from datetime import UTC, datetime, timedelta

import pytest
import yaml
from aiokafka import AIOKafkaProducer

from intentledger_client.signing import REGISTRY, typ
from joserfc import jws

from services.proposal_intake.repository import SCHEMA
from shared.identity.signatures import APPROVAL, HEADER, PROPOSAL, sign
from shared.topology import AGENT_PROPOSALS, LEDGER_INTAKE
from tests.support.identities import local, signature
from tests.support.intake import answers, generic, new_run, running_intake, send

pytestmark = pytest.mark.infra


async def _intents(pool, run_id: str) -> int:
    return await pool.fetchval(f"SELECT count(*) FROM {SCHEMA}.logical_calls WHERE run_id = $1", run_id)


async def _answers(endpoints, run: str, count: int, tenant: str = "acme") -> dict[str, dict]:
    found = await answers(endpoints.kafka_bootstrap, run, count, tenant=tenant)
    return {e["payload"]["call_id"]: e["payload"] for e in found}


async def test_an_agent_of_globex_cannot_act_for_acme_however_it_signs(pool, endpoints):
    """The issue's attack: globex's agent names acme's tenant and acme's agent in the body."""
    run = new_run()
    as_acme_agent = generic(run, "as-acme-agent", tenant="acme", principal_id="agent-7",
                            arguments={"wallet_id": "w-1", "amount": "40.00", "currency": "EUR"})
    own_name_acme = generic(run, "own-name-acme", operation_key="k2", principal_id="globex-agent")
    claims_acme = generic(run, "claims-acme", operation_key="k3", principal_id="globex-agent")
    async with running_intake(endpoints):
        await send(endpoints.kafka_bootstrap, as_acme_agent, own_name_acme,
                   signer=("globex-agent", "globex"))
        await send(endpoints.kafka_bootstrap, claims_acme, signer=("globex-agent", "acme"))
        replies = await _answers(endpoints, run, 3)
        in_the_ledger = await answers(endpoints.kafka_bootstrap, run, 1, topic=LEDGER_INTAKE,
                                      timeout=3)
    assert {call: (r["outcome"], r["reason_code"]) for call, r in replies.items()} == {
        "as-acme-agent": ("rejected", "signature_principal_mismatch"),
        "own-name-acme": ("rejected", "signature_tenant_mismatch"),
        "claims-acme": ("rejected", "tenant_not_allowed_for_principal")}
    assert all(r["tenant_id"] is None and r["principal_id"] is None for r in replies.values()), \
        "a refusal never repeats the identity the record claimed"
    assert in_the_ledger == [], "an unidentified sender writes nothing into acme's run history"
    assert await _intents(pool, run) == 0


async def test_unsigned_forged_tampered_and_misused_records_are_refused(pool, endpoints):
    run = new_run()
    calls = {name: json.dumps(generic(run, name, operation_key=name, principal_id="agent-7")).encode()
             for name in ("unsigned", "other-key", "tampered", "approval", "twice", "garbled")}
    mallory = local().signing_key("mallory")
    forged = sign(calls["other-key"], mallory, principal_id="agent-7", tenant_id="acme")
    tampered_header = signature(calls["tampered"].replace(b"40.00", b"4.00"))
    records = {
        "unsigned": [],
        "other-key": [(HEADER, forged.encode())],  # mallory's key, agent-7's name
        "tampered": [(HEADER, tampered_header)],  # signed for 4.00, says 40.00
        "approval": [(HEADER, signature(calls["approval"], use=APPROVAL))],
        "twice": [(HEADER, signature(calls["twice"]))] * 2,
        "garbled": [(HEADER, b"\xff not a jws")],
    }
    async with running_intake(endpoints):
        await _produce(endpoints, [(calls[name], headers) for name, headers in records.items()])
        replies = await _answers(endpoints, run, len(records))
    assert {call: r["reason_code"] for call, r in replies.items()} == {
        "unsigned": "signature_missing", "other-key": "signature_invalid",
        "tampered": "signature_invalid", "approval": "signature_for_another_use",
        "twice": "signature_malformed", "garbled": "signature_malformed"}
    assert await _intents(pool, run) == 0


async def test_the_lifetime_holds_to_the_clock_skew_window_and_not_a_second_beyond(pool, endpoints):
    run = new_run()
    now = datetime.now(UTC)
    cases = {  # iat relative to now, lifetime: what the intake's clock makes of it
        "ahead-within-skew": (timedelta(seconds=20), 60, "accepted"),
        "ahead-beyond-skew": (timedelta(seconds=90), 60, "signature_not_yet_valid"),
        "expired-within-skew": (timedelta(seconds=-80), 60, "accepted"),
        "expired-beyond-skew": (timedelta(minutes=-10), 60, "signature_expired"),
        "too-long-lived": (timedelta(0), 301, "signature_lifetime_too_long"),
    }
    records = []
    for name, (offset, lifetime, _) in cases.items():
        value = json.dumps(generic(run, name, operation_key=name)).encode()
        key = local().signing_key("user-42")
        token = _sign_unchecked(value, key, now + offset, lifetime)
        records.append((value, [(HEADER, token.encode())]))
    async with running_intake(endpoints):
        await _produce(endpoints, records)
        replies = await _answers(endpoints, run, len(cases))
    assert {call: r["reason_code"] or r["outcome"] for call, r in replies.items()} == {
        name: expected for name, (_, _, expected) in cases.items()}
    assert await _intents(pool, run) == 2


async def test_a_revoked_key_is_refused_once_the_edited_file_is_read_without_a_restart(
        pool, endpoints, tmp_path, monkeypatch):
    principals = yaml.safe_load(local().principals_file.read_text())
    edited = tmp_path / "principals.yaml"
    edited.write_text(yaml.safe_dump(principals))
    monkeypatch.setenv("INTENTLEDGER_INTAKE_PRINCIPALS_FILE", str(edited))
    monkeypatch.setenv("INTENTLEDGER_INTAKE_PRINCIPALS_RELOAD_INTERVAL_S", "0.2")
    run = new_run()
    async with running_intake(endpoints):
        await send(endpoints.kafka_bootstrap, generic(run, "before", operation_key="before"))
        assert (await _answers(endpoints, run, 1))["before"]["outcome"] == "accepted"
        for principal in principals["principals"]:
            if principal["id"] == "user-42":
                principal["keys"][0]["revoked_at"] = datetime.now(UTC).isoformat()
        edited.write_text(yaml.safe_dump(principals))
        await asyncio.sleep(1.0)  # five reload intervals
        await send(endpoints.kafka_bootstrap, generic(run, "after", operation_key="after"))
        replies = await _answers(endpoints, run, 2)
    assert replies["after"]["reason_code"] == "signing_key_revoked"
    assert await _intents(pool, run) == 1


async def test_unsigned_proposals_pass_only_for_the_tenants_development_mode_names(
        pool, endpoints, monkeypatch):
    monkeypatch.setenv("INTENTLEDGER_INTAKE_UNSIGNED_TENANTS", '["sandbox"]')
    run_sandbox, run_acme, run_forged = new_run(), new_run(), new_run()
    forged = json.dumps(generic(run_forged, "forged", tenant="sandbox")).encode()
    async with running_intake(endpoints):
        await send(endpoints.kafka_bootstrap, generic(run_sandbox, "dev", tenant="sandbox"),
                   generic(run_acme, "prod", tenant="acme"), signed=False)
        await _produce(endpoints, [(forged, [(HEADER, b"e30..AAAA")])])  # a bad one still fails
        sandbox, acme, bad = [await _answers(endpoints, run, 1, tenant)
                              for run, tenant in ((run_sandbox, "sandbox"), (run_acme, "acme"),
                                                  (run_forged, "sandbox"))]
    assert sandbox["dev"]["outcome"] == "accepted"
    assert acme["prod"]["reason_code"] == "signature_missing"
    assert bad["forged"]["reason_code"] == "signature_malformed"
    assert [await _intents(pool, run) for run in (run_sandbox, run_acme, run_forged)] == [1, 0, 0]


async def test_an_unsigned_record_with_no_readable_run_is_dead_lettered_with_its_reason(pool, endpoints):
    value = f"{{not json {new_run()}".encode()
    kept = f"SELECT reason FROM {SCHEMA}.dead_letters WHERE value = $1"
    async with running_intake(endpoints):
        await send(endpoints.kafka_bootstrap, value, signed=False)
        for _ in range(300):
            if reasons := await pool.fetch(kept, value):
                break
            await asyncio.sleep(0.1)
    assert [row["reason"].split(": ")[1] for row in reasons] == [
        "unanswerable proposal (signature_missing)"]


def _sign_unchecked(value: bytes, key, issued: datetime, lifetime_s: int) -> str:
    """A signature with any lifetime, as a hostile or badly configured signer makes one:
    ``sign`` itself refuses lifetimes over the limit."""
    if lifetime_s <= 300:
        return sign(value, key, principal_id="user-42", tenant_id="acme", lifetime_s=lifetime_s,
                    now=issued)
    iat = int(issued.timestamp())
    protected = {"alg": "Ed25519", "kid": key.kid, "typ": typ(PROPOSAL), "principal": "user-42",
                 "tenant": "acme", "iat": iat, "exp": iat + lifetime_s}
    return jws.detach_compact_content(jws.serialize_compact(protected, value, key, registry=REGISTRY))


async def _produce(endpoints, records: list[tuple[bytes, list]]) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=endpoints.kafka_bootstrap, acks="all")
    await producer.start()
    try:
        for value, headers in records:
            await producer.send_and_wait(AGENT_PROPOSALS, value, key=b"identity", headers=headers)
    finally:
        await producer.stop()
