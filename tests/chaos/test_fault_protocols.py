"""Every shipped fault protocol passes against the real stack, through the command users run
(``intentledger chaos run``), and the runner fails a scenario whose guarantee does not hold or
whose fault never fired.

This folder sorts first, so in CI the scenarios meet a database no other test has left calls in
(a scenario's dispatcher steps every due call, and counts it against its fault points)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from shared.contracts.fault_protocol import load
from tests.conftest import ROOT

pytestmark = pytest.mark.infra
SHIPPED = sorted((ROOT / "fault-protocols").glob("*.json"))
STARTUP_S = 90


def _chaos(endpoints, infra_settings, *files: Path, timeout: float) -> subprocess.CompletedProcess:
    env = {**os.environ, "INTENTLEDGER_KAFKA_BOOTSTRAP": endpoints.kafka_bootstrap,
           "INTENTLEDGER_DATABASE_URL": endpoints.database_url}
    if infra_settings is not None:  # outages stop and start the session's own processes
        env["INTENTLEDGER_HOME"] = str(infra_settings.home)
    return subprocess.run([sys.executable, "-m", "intentledger.cli", "chaos", "run", *map(str, files)],
                          env=env, capture_output=True, text=True, timeout=timeout, cwd=ROOT)


@pytest.mark.parametrize("path", SHIPPED, ids=[p.stem for p in SHIPPED])
async def test_shipped_scenario_holds(path, endpoints, infra_settings):
    deadline = load(path).time_limit_s
    result = await asyncio.to_thread(_chaos, endpoints, infra_settings, path,
                                     timeout=deadline + STARTUP_S)
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-3000:]
    assert result.stdout.rstrip().endswith("1 of 1 scenarios passed")


async def test_a_broken_guarantee_or_a_fault_that_never_fired_fails_the_run(
        endpoints, infra_settings, tmp_path):
    protocol = json.loads((ROOT / "fault-protocols" / "intent-durable-before-dispatch.json").read_text())
    protocol |= {"name": "runner-self-check",
                 **{name: str(ROOT / "fault-protocols" / protocol[name])
                    for name in ("policy_file", "tools_file")}}
    protocol["faults"].append({"kind": "inject", "id": "never", "service": "dispatcher",
                               "point": "dispatcher.mid_compensation", "action": "exit"})
    protocol["assertions"].append({"fact": "business_effects", "call": "debit", "value": 2})
    path = tmp_path / "self-check.json"
    path.write_text(json.dumps(protocol))

    result = await asyncio.to_thread(_chaos, endpoints, infra_settings, path,
                                     timeout=protocol["time_limit_s"] + STARTUP_S)

    assert result.returncode == 1, result.stdout[-4000:] + result.stderr[-2000:]
    assert "FAIL business_effects of debit == 2: measured 1" in result.stdout
    assert "PROBLEM fault never never fired" in result.stdout
    assert "ok   business_effects of debit (at crash) == 0: measured 0" in result.stdout
    assert result.stdout.rstrip().endswith("0 of 1 scenarios passed")
