"""No code that uses a pooled connection leaves session state behind: the pool does not reset
connections on release (``shared.db.pool``), so a session-level SET, a session advisory lock or
a LISTEN would leak into the next transaction that borrows the connection."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SESSION_STATE = {
    "a session-level SET": re.compile(
        r"\bSET\s+(?!LOCAL\b)(SESSION\s+)?(ROLE|search_path|lock_timeout|statement_timeout|"
        r"idle_in_transaction_session_timeout|synchronous_commit|work_mem|TIME\s+ZONE)\b", re.I),
    "set_config(..., false)": re.compile(r"set_config\([^)]*,\s*false\s*\)", re.I),
    "a session advisory lock": re.compile(r"pg_(try_)?advisory_lock(_shared)?\s*\("),
    "LISTEN": re.compile(r"['\"]\s*LISTEN\b|\.add_listener\("),
}
ALLOWED = {
    # The wake-up has a connection of its own, never a pooled one.
    ("shared/db/wakeup.py", "LISTEN"),
}
SOURCES = sorted(path for folder in ("services", "shared")
                 for path in (ROOT / folder).rglob("*.py"))


def _findings(text: str, relative: str) -> list[str]:
    return [f"{relative}: {what}" for what, pattern in SESSION_STATE.items()
            if (relative, what) not in ALLOWED and pattern.search(text)]


def test_no_session_state_on_pooled_connections():
    assert SOURCES
    assert [finding for path in SOURCES
            for finding in _findings(path.read_text(), str(path.relative_to(ROOT)))] == []


@pytest.mark.parametrize("statement", [
    "await conn.execute(\"SET lock_timeout = '5s'\")",
    "await conn.execute('SET SESSION ROLE reader')",
    "await conn.execute(\"SELECT set_config('intentledger.tenant', $1, false)\")",
    "await conn.fetchval('SELECT pg_try_advisory_lock(1)')",
    "await conn.execute('LISTEN intentledger_outbox')",
])
def test_the_scan_sees_session_state(statement):
    assert _findings(statement, "services/example.py")


@pytest.mark.parametrize("statement", [
    "await conn.execute(\"SET LOCAL lock_timeout = '5s'\")",
    "await conn.execute(f'SET LOCAL ROLE {role}')",
    "await conn.execute(\"SELECT set_config('statement_timeout', $1, true)\")",
    "await conn.fetchval('SELECT pg_try_advisory_xact_lock(1)')",
    "f\"INSERT INTO t (scope, fence) VALUES ($1, $2) ON CONFLICT (scope) DO UPDATE SET fence = 1\"",
])
def test_the_scan_lets_transaction_scoped_state_through(statement):
    assert _findings(statement, "services/example.py") == []
