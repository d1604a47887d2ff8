"""``intentledger audit``: the settled-call audit on demand (``services/dispatcher/audit``), and
the operators' queue of what the scheduled audit found.

``audit --tool T --since 2h [--until 10m]`` asks T's downstream about the window now and prints
the drift, both ways; ``--record`` also puts it in the queue (and the metric), as the scheduled
audit does. ``audit findings`` lists the queue. Exit 0: no drift; 1: drift; 2: the audit could
not run (a bad argument, a tool without ``audit_url``, a downstream that did not answer)."""

from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import asdict
from datetime import UTC, datetime, timedelta
from pathlib import Path

from shared.config import Settings

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_COLUMNS = ("kind", "tool_name", "operation_key", "logical_call_id", "ledger_state", "effect_ids")


def add_audit_command(commands: argparse._SubParsersAction) -> None:
    audit = commands.add_parser("audit", help="check settled calls against what the downstream "
                                "holds, or list what the scheduled audit found")
    audit.add_argument("action", nargs="?", choices=["findings"],
                       help="list the operators' queue of findings instead")
    audit.add_argument("--tool", help="the tool to audit (its registry entry names audit_url)")
    audit.add_argument("--since", help="the window's start: 2h, 30m, 7d ago, or an RFC 3339 time")
    audit.add_argument("--until", help="its end, the same way (default: now)")
    audit.add_argument("--registry", metavar="FILE", help="a registry file (default: the "
                       "dispatcher's)")
    audit.add_argument("--record", action="store_true",
                       help="also put the findings in the operators' queue and the metric")
    audit.add_argument("--json", action="store_true", help="JSON for scripts")


async def audit_command(settings: Settings, args: argparse.Namespace) -> int:
    if args.action == "findings":
        return await _findings(settings, args.tool, args.json)
    try:
        if not args.tool or not args.since:
            raise ValueError("--tool and --since are required")
        now = datetime.now(UTC)
        since, until = _instant(args.since, now), _instant(args.until, now) if args.until else now
        url = _audit_url(args.tool, args.registry)
    except ValueError as bad:
        print(f"intentledger audit: {bad}", file=sys.stderr)
        return 2
    import aiohttp
    import asyncpg

    from services.dispatcher.audit.client import AuditClient, AuditUnavailable
    from services.dispatcher.audit.drift import audit
    from services.dispatcher.audit.findings import record

    conn = await asyncpg.connect(settings.endpoints.database_url)
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60)) as session:
            done = await audit(conn, AuditClient(session, url), args.tool, since, until)
        if args.record:
            await record(conn, done.findings)
    except AuditUnavailable as error:
        print(f"intentledger audit: {error}", file=sys.stderr)
        return 2
    finally:
        await conn.close()
    rows = [asdict(finding) for finding in done.findings]
    if args.json:
        print(json.dumps({"tool_name": done.tool_name, "since": since.isoformat(),
                          "until": until.isoformat(), "ledger_applied": done.ledger_applied,
                          "downstream_listed": done.downstream_listed, "findings": rows},
                         default=str, indent=2))
    else:
        from services.query.tables import render

        print(f"{done.tool_name} from {since.isoformat()} to {until.isoformat()}: "
              f"{done.ledger_applied} applied calls asked about by key, "
              f"{done.downstream_listed} effects listed, {len(rows)} findings")
        if rows:
            print(render(rows, _COLUMNS))
    return 1 if rows else 0


async def _findings(settings: Settings, tool: str | None, as_json: bool) -> int:
    import asyncpg

    conn = await asyncpg.connect(settings.endpoints.database_url)
    try:
        rows = [dict(row) for row in await conn.fetch(
            "SELECT * FROM dispatcher.audit_findings WHERE $1::text IS NULL OR tool_name = $1"
            " ORDER BY first_found_at, tool_name, operation_key", tool)]
    finally:
        await conn.close()
    if as_json:
        print(json.dumps(rows, default=str, indent=2))
    else:
        from services.query.tables import render

        print(render(rows, (*_COLUMNS, "first_found_at", "last_found_at")))
    return 1 if rows else 0


def _instant(text: str, now: datetime) -> datetime:
    if match := re.fullmatch(r"(\d+)([smhd])", text):
        return now - timedelta(seconds=int(match[1]) * _UNITS[match[2]])
    try:
        instant = datetime.fromisoformat(text)
    except ValueError:
        instant = None
    if instant is None or instant.tzinfo is None:
        raise ValueError(f"{text!r}: a duration ago (90s, 30m, 2h, 7d) or an RFC 3339 time "
                         "with an offset")
    return instant


def _audit_url(tool: str, registry: str | None) -> str:
    from services.dispatcher.audit.findings import audited_tools
    from services.dispatcher.settings import DispatcherSettings
    from shared.tools import RegistryError, load_registry

    try:
        tools = load_registry(Path(registry) if registry else DispatcherSettings().tools_file)
    except RegistryError as error:
        raise ValueError(str(error)) from None
    if (url := audited_tools(tools).get(tool)) is None:
        raise ValueError(f"the registry declares no audit_url for {tool!r}")
    return url
