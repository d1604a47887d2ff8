"""The operator console ``intentledger demo`` leaves running, so its runs can be looked at.

A detached ``intentledger serve query`` (the query API and the console) on the configured
port (8090, or a free one), with a fresh operator token for this machine's person, recorded
in ``<home>/console.json`` (readable by its owner only). The next demo replaces it;
``intentledger infra down`` stops it.
"""

from __future__ import annotations

import json
import os
import secrets
import sys
from dataclasses import asdict, dataclass
from pathlib import Path


from services.query.settings import QuerySettings
from intentledger.demo.identities import OPERATOR_ID, demo_identities, service_env
from shared.config import Endpoints, Settings
from shared.infra import processes
from shared.infra.ports import choose
from shared.infra.postgres_local import login_url
from shared.infra.readiness import http_answers, wait_until

MARKER = "intentledger.cli serve query"
READY_S = 60.0


@dataclass(frozen=True)
class DemoConsole:
    url: str
    token: str
    pid: int


def _state_file(settings: Settings) -> Path:
    return settings.home / "console.json"


async def start(settings: Settings, endpoints: Endpoints) -> DemoConsole:
    stop(settings)
    query = QuerySettings()
    port = choose([query.port], set())
    token = secrets.token_urlsafe(18)
    env = {**os.environ, "INTENTLEDGER_KAFKA_BOOTSTRAP": endpoints.kafka_bootstrap,
           "INTENTLEDGER_DATABASE_URL": login_url(endpoints.database_url),
           "INTENTLEDGER_QUERY_PORT": str(port), "INTENTLEDGER_QUERY_HOST": query.host,
           "INTENTLEDGER_CONSOLE_TOKENS": json.dumps({token: {"id": OPERATOR_ID, "tenant": "*"}}),
           "INTENTLEDGER_QUERY_API_KEYS": json.dumps({**query.api_keys, token: "*"}),
           **service_env(demo_identities(settings))}
    env.pop("INTENTLEDGER_HEALTH_PORT", None)
    pid = processes.spawn([sys.executable, "-m", "intentledger.cli", "serve", "query"],
                          settings.logs_dir / "console.log", env=env)
    console = DemoConsole(f"http://{query.host}:{port}/console/", token, pid)
    path = _state_file(settings)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.touch(mode=0o600)
    path.write_text(json.dumps(asdict(console)))
    await _answers(f"http://{query.host}:{port}/healthz", pid)
    return console


def stop(settings: Settings) -> bool:
    """Stop the demo's console if it runs; True when there was one."""
    path = _state_file(settings)
    if not path.exists():
        return False
    try:
        pid = json.loads(path.read_text()).get("pid")
    except (ValueError, AttributeError):  # not what start() wrote: nothing of ours to stop
        pid = None
    running = processes.is_alive(pid, MARKER)
    if running:
        processes.stop(pid, MARKER)
    path.unlink()
    return running


async def _answers(url: str, pid: int) -> None:
    await wait_until(lambda: http_answers(url), "the console", READY_S,
                     alive=lambda: processes.is_alive(pid, MARKER),
                     log_hint="; see its log (logs/console.log)")
