"""The README's first command works: the demo runs its real processes, reports success and
leaves the operator console running, signed in with the token it printed, until
``infra down``."""

import asyncio
import json
import os
import re
import subprocess
import sys

import aiohttp
import pytest

from shared.infra import processes

pytestmark = pytest.mark.infra


async def test_the_demo_round_trips_an_event_and_answers_an_agent(endpoints, tmp_path):
    env = {**os.environ, "INTENTLEDGER_KAFKA_BOOTSTRAP": endpoints.kafka_bootstrap,
           "INTENTLEDGER_DATABASE_URL": endpoints.database_url,
           "INTENTLEDGER_HOME": str(tmp_path / "home")}
    result = await asyncio.to_thread(
        subprocess.run, [sys.executable, "-m", "intentledger.cli", "demo"], env=env,
        capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "delivered twice, applied 1x" in result.stdout
    assert "-> duplicate" in result.stdout and "(operation_key_conflict)" in result.stdout
    assert "one intent, one debit, reconciled" in result.stdout
    assert "replay" in result.stdout and ": equal" in result.stdout
    assert "policy denied (denied_by_rule); dispatcher calls: 0" in result.stdout
    assert "refused (principal_lacks_role)" in result.stdout  # the requester is no approver
    assert result.stdout.rstrip().endswith("demo OK")
    url, token = re.search(r"console: (http://\S+/console/)\s+sign in with the token (\S+)",
                           result.stdout).groups()
    recorded = json.loads((tmp_path / "home" / "console.json").read_text())
    try:
        base = url.removesuffix("/console/")
        jar = aiohttp.CookieJar(unsafe=True, treat_as_secure_origin=base)  # as a browser on loopback
        async with aiohttp.ClientSession(cookie_jar=jar) as browser:
            async with browser.post(f"{base}/console/session",
                                    json={"token": token}) as signed_in:
                assert signed_in.status == 200
            async with browser.get(f"{base}/v1/unknown") as queue:
                assert queue.status == 200  # the session reads the query API
            async with browser.get(f"{base}/v1/runs",
                                   params={"limit": "1000"}) as runs:
                assert runs.status == 200 and (await runs.json())["items"]
    finally:
        down = await asyncio.to_thread(
            subprocess.run, [sys.executable, "-m", "intentledger.cli", "infra", "down"], env=env,
            capture_output=True, text=True, timeout=60)
    assert "stopped the demo's console" in down.stdout, down.stdout + down.stderr
    assert not processes.is_alive(recorded["pid"], "intentledger.cli serve query")
