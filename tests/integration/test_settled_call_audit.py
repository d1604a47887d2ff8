"""The settled-call audit's drift protocol, on real Kafka, PostgreSQL and the reference wallet's
audit API: a dozen debits settle; then the wallet loses one after it was receipted (a restore
from an old backup), applies a second debit under another's key, and holds a debit the ledger
never asked for. The dispatcher's scheduled audit records exactly those three, each once, in
the operators' queue, and repairs nothing; ``intentledger audit`` finds the same on demand.

The audit reads the whole shared database's window, where other tests leave debits the
dispatcher never sent: assertions look only at this test's keys."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import uuid

import pytest

from tests.conftest import ROOT
from tests.support.dispatch import Stage, debit_intent, dispatcher_stage, settled
from tests.support.dispatching import authorize, running
from tests.support.ports import free_port
from tests.support.kafka import wait_for
from tests.support.wallet import debits_under, new_wallet

pytestmark = pytest.mark.infra
DEBITS = 12


@pytest.fixture
async def stage(pool, endpoints, tmp_path) -> Stage:
    async with dispatcher_stage(pool, endpoints, tmp_path) as prepared:
        yield prepared


async def test_the_audit_finds_a_lost_a_repeated_and_an_unrecorded_debit_and_repairs_nothing(
        stage, pool):
    port = free_port()
    stage.write_registry(**{"wallet.debit": {"audit_url": f"http://127.0.0.1:{port}/audit"}})
    wallets = [await new_wallet(pool, 100_000) for _ in range(3)]
    intents = [debit_intent(wallets[n % 3], 1000 + n) for n in range(DEBITS)]
    lost, repeated = intents[3], intents[7]
    stray = f"acme:caller_stated:{uuid.uuid4().hex}"
    ours = {intent.operation_key for intent in intents} | {stray}
    async with running(stage, wallet={"http_port": port}, audit_interval_s=0.5,
                       audit_lookback_s=600, audit_settle_s=0):
        await authorize(stage, *intents)
        for intent in intents:
            assert await settled(pool, intent.logical_call_id) == "SUCCEEDED"
        before = await _findings(pool, ours)
        await _lose(pool, lost.operation_key)
        await _apply_again(pool, repeated.operation_key)
        await _apply_unasked(pool, wallets[0], stray)
        assert await wait_for(lambda: _count(pool, ours, 3), timeout=30), await _findings(pool, ours)
        await asyncio.sleep(1.5)  # a few more rounds: found again, never recorded twice
        found = await _findings(pool, ours)
        on_demand = await asyncio.to_thread(_audit_cli, stage, "--tool", "wallet.debit",
                                            "--since", "10m", "--json")
    assert before == []
    assert {(f["kind"], f["operation_key"]) for f in found} == {
        ("applied_not_in_downstream", lost.operation_key),
        ("repeated_in_downstream", repeated.operation_key),
        ("downstream_not_in_ledger", stray)}
    by_kind = {f["kind"]: f for f in found}
    assert by_kind["applied_not_in_downstream"]["logical_call_id"] == lost.logical_call_id
    assert by_kind["applied_not_in_downstream"]["ledger_state"] == "SUCCEEDED"
    assert len(by_kind["repeated_in_downstream"]["effect_ids"]) == 2
    assert by_kind["downstream_not_in_ledger"]["logical_call_id"] is None
    assert all(f["last_found_at"] > f["first_found_at"] for f in found)
    # Nothing repaired: the lost debit stays lost, the ledger still says it succeeded, once.
    assert await debits_under(pool, lost.operation_key) == 0
    assert await pool.fetchval("SELECT state FROM dispatcher.calls WHERE logical_call_id = $1",
                               lost.logical_call_id) == "SUCCEEDED"
    assert await pool.fetchval("SELECT count(*) FROM dispatcher.attempts WHERE logical_call_id"
                               " = $1", lost.logical_call_id) == 1

    assert on_demand.returncode == 1, on_demand.stderr
    report = json.loads(on_demand.stdout)
    assert {(f["kind"], f["operation_key"]) for f in report["findings"]
            if f["operation_key"] in ours} == {(f["kind"], f["operation_key"]) for f in found}
    assert report["ledger_applied"] >= DEBITS and report["downstream_listed"] >= DEBITS


async def test_an_audit_that_cannot_ask_the_downstream_concludes_nothing(stage, pool):
    """No answer is no evidence: the audit says it could not run (exit 2), it finds nothing."""
    stage.write_registry(**{"wallet.debit": {"audit_url": f"http://127.0.0.1:{free_port()}/audit"}})
    result = await asyncio.to_thread(_audit_cli, stage, "--tool", "wallet.debit", "--since", "1h")
    assert result.returncode == 2
    assert "unreachable" in result.stderr and result.stdout == ""


async def _lose(pool, key: str) -> None:
    """The wallet restored from a backup older than the debit: the debit, its key and the money
    taken are all gone from it."""
    async with pool.acquire() as conn, conn.transaction():
        row = await conn.fetchrow("DELETE FROM wallet.debits WHERE operation_key = $1"
                                  " RETURNING wallet_id, amount_minor", key)
        await conn.execute("UPDATE wallet.wallets SET balance_minor = balance_minor + $2"
                           " WHERE id = $1", row["wallet_id"], row["amount_minor"])
        await conn.execute("DELETE FROM wallet.idempotency_keys WHERE operation_key = $1", key)


async def _apply_again(pool, key: str) -> None:
    await pool.execute(
        "INSERT INTO wallet.debits (debit_id, wallet_id, amount_minor, currency, operation_key,"
        " logical_call_id, attempt, fence) SELECT $2, wallet_id, amount_minor, currency,"
        " operation_key, logical_call_id, attempt + 1, fence FROM wallet.debits"
        " WHERE operation_key = $1", key, str(uuid.uuid4()))


async def _apply_unasked(pool, wallet_id: str, key: str) -> None:
    await pool.execute(
        "INSERT INTO wallet.debits (debit_id, wallet_id, amount_minor, currency, operation_key,"
        " logical_call_id, attempt, fence) VALUES ($1, $2, 500, 'EUR', $3, $4, 1, 1)",
        str(uuid.uuid4()), wallet_id, key, uuid.uuid4())


async def _findings(pool, keys: set[str]) -> list[dict]:
    return [dict(row) for row in await pool.fetch(
        "SELECT * FROM dispatcher.audit_findings WHERE operation_key = ANY($1::text[])"
        " ORDER BY kind", list(keys))]


async def _count(pool, keys: set[str], expected: int) -> bool:
    return len(await _findings(pool, keys)) == expected


def _audit_cli(stage: Stage, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "INTENTLEDGER_DATABASE_URL": stage.endpoints.database_url,
           "INTENTLEDGER_KAFKA_BOOTSTRAP": stage.endpoints.kafka_bootstrap}
    return subprocess.run([sys.executable, "-m", "intentledger.cli", "audit", *args,
                           "--registry", str(stage.tools_file)], env=env, capture_output=True,
                          text=True, timeout=120, cwd=ROOT)
