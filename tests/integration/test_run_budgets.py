"""Runs as users make them, under the shipped default settings, through the whole pipeline on
real Kafka and PostgreSQL: a run of dozens of calls, every one succeeding, is never stopped by
its own budgets."""

from __future__ import annotations

import uuid

import pytest

from shared import faults
from tests.support.dispatch import settled
from tests.support.identities import fresh_principal
from tests.support.pipeline import answer, debit, names, propose
from tests.support.pipeline_stack import pipeline, pipeline_stage, projected
from tests.support.wallet import balance, new_wallet

pytestmark = pytest.mark.infra

CALLS = 30


@pytest.fixture
async def stage(pool, endpoints, tmp_path):
    yield await pipeline_stage(pool, endpoints, tmp_path)
    faults.configure("")


async def test_a_thirty_call_run_under_the_shipped_defaults_applies_every_call(stage, pool):
    """With the shipped defaults a run could not make a sixth call: calls 1-5 succeeded, call 6
    was denied ``run_attempt_budget_exhausted``, the rest ``run_aborted``, and the five applied
    debits were sent to compensation. The intake's defaults are not overridden here."""
    run_id, _ = names()
    principal = fresh_principal()
    wallet_id = await new_wallet(pool, 100_000)
    async with pipeline(stage):
        await propose(stage, *(debit(run_id, principal, wallet_id, "1.00", call_id=f"call-{n}",
                                     key=f"line-{n}") for n in range(CALLS)))
        accepted = [(await answer(pool, stage, run_id, f"call-{n}"))["payload"]
                    for n in range(CALLS)]
        assert [a["outcome"] for a in accepted] == ["accepted"] * CALLS
        states = [await settled(pool, uuid.UUID(a["logical_call_id"]), timeout=120)
                  for a in accepted]
        run = await projected(pool, "runs", "run_id", run_id, where=" AND status = 'completed'")
    assert states == ["SUCCEEDED"] * CALLS
    assert await pool.fetchval("SELECT count(*) FROM wallet.debits WHERE wallet_id = $1",
                               wallet_id) == CALLS
    assert await balance(pool, wallet_id) == 100_000 - CALLS * 100
    assert await pool.fetchval("SELECT count(*) FROM dispatcher.calls WHERE run_id = $1"
                               " AND compensates IS NOT NULL", run_id) == 0
    assert (run["calls"], run["stop_reason"]) == (CALLS, None)
