"""The README's first command works: the demo runs its real processes and reports success."""

import asyncio
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.infra


async def test_the_demo_round_trips_an_event_and_answers_an_agent(endpoints, tmp_path):
    env = {**os.environ, "INTENTLEDGER_KAFKA_BOOTSTRAP": endpoints.kafka_bootstrap,
           "INTENTLEDGER_DATABASE_URL": endpoints.database_url,
           "INTENTLEDGER_HOME": str(tmp_path / "home")}
    result = await asyncio.to_thread(
        subprocess.run, [sys.executable, "-m", "services.cli", "demo"], env=env,
        capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "delivered twice, applied 1x" in result.stdout
    assert "-> duplicate" in result.stdout and "(operation_key_conflict)" in result.stdout
    assert "one intent, one debit, reconciled" in result.stdout
    assert "replay" in result.stdout and ": equal" in result.stdout
    assert "policy denied (denied_by_rule); dispatcher calls: 0" in result.stdout
    assert "refused (approver_is_requester)" in result.stdout
    assert result.stdout.rstrip().endswith("demo OK")
