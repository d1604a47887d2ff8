"""Fixtures several integration test modules share."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from tests.support.agents import policy
from tests.support.dispatch import Stage
from tests.support.identities import fresh_principal
from tests.support.pipeline_stack import pipeline_stage


@dataclass
class PayerStage:
    """A pipeline stage whose policy (``agents.policy``) lets ``payer`` debit acme's wallets:
    not the blocked ones, and above the cap only with finance's approval."""

    stage: Stage
    payer: str


@pytest.fixture
async def payer_stage(pool, endpoints, tmp_path) -> PayerStage:
    stage = await pipeline_stage(pool, endpoints, tmp_path)
    payer = fresh_principal()
    stage.write_policy(policy(payer, fresh_principal()))
    return PayerStage(stage, payer)
