"""What the audit finds goes to the operators' queue (``dispatcher.audit_findings``) and a
metric (``dispatcher_audit_drift_total{tool,kind}``, counted once per finding, when first
found); the scheduled audit runs in the dispatcher's process, every tool that declares an
``audit_url`` over a window that ends ``audit_settle_s`` ago, so calls settling right now are
not mistaken for drift."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from typing import get_args

import aiohttp
import asyncpg

from services.dispatcher.audit.client import AuditClient, AuditUnavailable
from services.dispatcher.audit.drift import Audit, Finding, Kind, audit
from services.dispatcher.settings import DispatcherSettings
from shared import metric_catalog
from shared.tools import ToolRegistry

log = logging.getLogger(__name__)
_DRIFT = metric_catalog.counter("dispatcher.audit_drift")


async def record(conn: asyncpg.Connection, findings: list[Finding]) -> list[Finding]:
    """Upsert the findings; the ones not recorded before."""
    new = []
    for finding in findings:
        inserted = await conn.fetchval(
            "INSERT INTO dispatcher.audit_findings (tool_name, operation_key, kind,"
            " logical_call_id, ledger_state, effect_ids) VALUES ($1, $2, $3, $4, $5, $6)"
            " ON CONFLICT (tool_name, operation_key, kind) DO UPDATE SET last_found_at = now(),"
            " ledger_state = EXCLUDED.ledger_state, effect_ids = EXCLUDED.effect_ids"
            " RETURNING xmax = 0", finding.tool_name, finding.operation_key, finding.kind,
            finding.logical_call_id, finding.ledger_state, list(finding.effect_ids))
        if inserted:
            new.append(finding)
    return new


async def audit_all(pool: asyncpg.Pool, registry: ToolRegistry, config: DispatcherSettings,
                    session: aiohttp.ClientSession) -> list[Audit]:
    """One round: every audited tool over the scheduled window; a downstream that does not
    answer is logged and asked again next round."""
    until = datetime.now(UTC) - timedelta(seconds=config.audit_settle_s)
    since = until - timedelta(seconds=config.audit_lookback_s)
    audits = []
    for tool, url in audited_tools(registry).items():
        try:
            async with pool.acquire() as conn:
                done = await audit(conn, AuditClient(session, url), tool, since, until)
                new = await record(conn, done.findings)
        except AuditUnavailable as error:
            log.warning("audit of %s: %s", tool, error)
            continue
        for finding in new:
            _DRIFT.add(1, {"tool": tool, "kind": finding.kind})
            log.error("audit of %s: %s for operation key %s (call %s)", tool, finding.kind,
                      finding.operation_key, finding.logical_call_id)
        audits.append(done)
    return audits


def audited_tools(registry: ToolRegistry) -> dict[str, str]:
    """Tool name → audit URL, for every tool that declares one (any version's)."""
    return {tool.name: tool.audit_url for tool in registry.tools if tool.audit_url}


def start_at_zero(registry: ToolRegistry) -> None:
    """A series per tool and kind, born at 0 so that ``increase()`` sees the first finding (a
    tool without ``audit_url`` stays at 0, as the dispatcher's other counters do)."""
    for tool in sorted({spec.name for spec in registry.tools}):
        for kind in get_args(Kind):
            _DRIFT.add(0, {"tool": tool, "kind": kind})
