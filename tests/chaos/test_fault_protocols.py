"""Every shipped fault protocol passes against the real stack, through the command users run
(``intentledger chaos run fault-protocols/``, once for all of them: a process per scenario
cost each one 2 s of start-up and attach), and the runner fails a scenario whose guarantee does
not hold or whose fault never fired.

This folder sorts first, so in CI the scenarios meet a database no other test has left calls in
(a scenario's dispatcher steps every due call, and counts it against its fault points)."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from shared.contracts.fault_protocol import load
from tests.conftest import ROOT

pytestmark = pytest.mark.infra
SHIPPED = sorted((ROOT / "fault-protocols").glob("*.json"))
STARTUP_S = 90
RUN_LIMIT_S = sum(load(path).time_limit_s + STARTUP_S for path in SHIPPED)


def _chaos(endpoints, infra_settings, *files: Path, timeout: float) -> subprocess.CompletedProcess:
    env = {**os.environ, "INTENTLEDGER_KAFKA_BOOTSTRAP": endpoints.kafka_bootstrap,
           "INTENTLEDGER_DATABASE_URL": endpoints.database_url}
    if infra_settings is not None:  # outages stop and start the session's own processes
        env["INTENTLEDGER_HOME"] = str(infra_settings.home)
    return subprocess.run([sys.executable, "-m", "intentledger.cli", "chaos", "run", *map(str, files)],
                          env=env, capture_output=True, text=True, timeout=timeout, cwd=ROOT)


@pytest.fixture(scope="module")
def shipped_run(endpoints, infra_settings) -> tuple[subprocess.CompletedProcess, dict[str, str]]:
    """One run of the command over the folder, and each scenario's part of what it printed,
    by protocol name."""
    result = _chaos(endpoints, infra_settings, ROOT / "fault-protocols", timeout=RUN_LIMIT_S)
    parts = re.split(r"^== ", result.stdout, flags=re.MULTILINE)[1:]
    return result, {part.split(" (", 1)[0]: part for part in parts}


@pytest.mark.timeout(RUN_LIMIT_S + 60)  # the first of them waits for the whole run
@pytest.mark.parametrize("path", SHIPPED, ids=[p.stem for p in SHIPPED])
def test_shipped_scenario_holds(path, shipped_run):
    result, parts = shipped_run
    name = load(path).name
    assert name in parts, f"{name} did not run: {result.stdout[-3000:]}{result.stderr[-3000:]}"
    verdict = re.search(r"^   (PASSED|FAILED)$", parts[name], flags=re.MULTILINE)
    assert verdict and verdict.group(1) == "PASSED", parts[name]


@pytest.mark.timeout(RUN_LIMIT_S + 60)
def test_the_run_over_the_folder_passes_as_a_whole(shipped_run):
    """Its exit status and last line, what a CI job of the user's reads."""
    result, parts = shipped_run
    assert len(parts) == len(SHIPPED), result.stdout[-3000:] + result.stderr[-3000:]
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert result.stdout.rstrip().endswith(f"{len(SHIPPED)} of {len(SHIPPED)} scenarios passed")


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
