"""Two intake transactions racing for one tenant-wide operation key (two runs, two replicas)."""

import asyncio
import json
import uuid
from pathlib import Path

import pytest

from services.proposal_intake.handlers import Intake, RawProposal
from services.proposal_intake.repository import SCHEMA
from services.proposal_intake.settings import IntakeSettings
from shared.identity.principals import PrincipalsWatcher
from shared.db.schemas import migrate_service
from shared.db.unit_of_work import UnitOfWork
from shared.tools import load_registry
from tests.support.identities import signature
from tests.support.intake import generic, new_run

pytestmark = pytest.mark.infra
REGISTRY = Path(__file__).parents[2] / "config" / "tools.example.yaml"


async def _answer_types(pool, run_id: str) -> list[str]:
    rows = await pool.fetch(f"SELECT envelope->>'event_type' AS t FROM {SCHEMA}.outbox "
                            "WHERE partition_key = $1 AND topic = 'agent.results.acme'", run_id)
    return [row["t"] for row in rows]


def _signed(message: dict) -> RawProposal:
    value = json.dumps(message).encode()
    return RawProposal(uuid.uuid4(), value, signatures=(signature(value),))


async def _in_own_unit_of_work(pool, intake: Intake, raw: RawProposal) -> None:
    async with UnitOfWork(pool, SCHEMA) as uow:
        await intake.take(uow, raw)
        await uow.commit()


@pytest.mark.parametrize("same_arguments, expected", [(True, "DuplicateProposal"),
                                                      (False, "ProposalRejected")])
async def test_the_loser_of_a_key_race_is_answered_as_duplicate_or_conflict(pool, same_arguments, expected):
    await migrate_service(pool, SCHEMA)
    settings = IntakeSettings()
    intake = Intake(load_registry(REGISTRY), settings, PrincipalsWatcher(settings.principals_file))
    key = f"race-{uuid.uuid4().hex[:8]}"
    first_run, second_run = new_run(), new_run()
    amount = "40.00" if same_arguments else "41.00"
    first = generic(first_run, "c1", operation_key=None) | {"operation_key": key}
    second = generic(second_run, "c2", operation_key=None) | {
        "operation_key": key, "arguments": {"wallet_id": "w-1", "amount": amount, "currency": "EUR"}}

    async with UnitOfWork(pool, SCHEMA) as winner:
        await intake.take(winner, _signed(first))
        loser = asyncio.create_task(_in_own_unit_of_work(pool, intake, _signed(second)))
        await asyncio.sleep(0.5)
        assert not loser.done(), "the second insert waits on the first one's key"
        await winner.commit()
    await loser

    assert await _answer_types(pool, first_run) == ["ProposalAccepted"]
    assert await _answer_types(pool, second_run) == [expected]
    assert await pool.fetchval(f"SELECT count(*) FROM {SCHEMA}.logical_calls WHERE run_id = ANY($1)",
                               [first_run, second_run]) == 1
    reason = await pool.fetchval(
        f"SELECT envelope->'payload'->>'reason_code' FROM {SCHEMA}.outbox "
        "WHERE partition_key = $1 AND topic = 'agent.results.acme'", second_run)
    assert reason == (None if same_arguments else "operation_key_conflict")
