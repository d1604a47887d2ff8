"""Drift, both ways, between the ledger's settled calls and a downstream's effects.

- ``applied_not_in_downstream``: the ledger recorded the call as applied (it succeeded, in the
  window) and the downstream holds no effect under its key: lost, rolled back, restored from
  an old backup.
- ``downstream_not_in_ledger``: the downstream applied an effect, in the window, under a key the
  ledger has no call for, or whose call it settled as not applied (FAILED, DENIED, EXPIRED).
- ``repeated_in_downstream``: the downstream holds more than one effect under one applied key:
  the double effect the ledger exists to prevent.

A call still in flight or unresolved (UNKNOWN, RECONCILING, MANUAL_REVIEW) is reconciliation's
business, not drift. The downstream is asked by key about the ledger's calls, from its effect
records, so an effect whose idempotency key it has forgotten is still found.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

import asyncpg

from services.dispatcher.audit.client import AuditClient
from shared.contracts.audit import AuditedEffect
from shared.contracts.dispatch import CallState

Kind = Literal["applied_not_in_downstream", "downstream_not_in_ledger", "repeated_in_downstream"]
NOT_APPLIED = (CallState.FAILED, CallState.DENIED, CallState.EXPIRED)


@dataclass(frozen=True)
class Finding:
    kind: Kind
    tool_name: str
    operation_key: str
    logical_call_id: uuid.UUID | None = None
    ledger_state: str | None = None
    effect_ids: tuple[str, ...] = ()
    """The downstream's effects under the key (none for applied_not_in_downstream)."""


@dataclass
class Audit:
    tool_name: str
    since: datetime
    until: datetime
    ledger_applied: int = 0
    """Calls the ledger settled as applied in the window, each asked about by key."""
    downstream_listed: int = 0
    """Effects the downstream listed in the window, each looked for in the ledger."""
    findings: list[Finding] = field(default_factory=list)


async def audit(conn: asyncpg.Connection, client: AuditClient, tool: str, since: datetime,
                until: datetime) -> Audit:
    result = Audit(tool, since, until)
    applied = await conn.fetch(
        "SELECT logical_call_id, operation_key, state FROM dispatcher.calls WHERE tool_name = $1"
        " AND succeeded_at >= $2 AND succeeded_at < $3", tool, since, until)
    result.ledger_applied = len(applied)
    held = _by_key(await client.by_key(tool, [row["operation_key"] for row in applied]))
    for row in applied:
        effects = held.get(row["operation_key"], [])
        if len(effects) != 1:
            result.findings.append(Finding(
                "repeated_in_downstream" if effects else "applied_not_in_downstream", tool,
                row["operation_key"], row["logical_call_id"], row["state"],
                tuple(effect.effect_id for effect in effects)))
    listed = await client.listed(tool, since, until)
    result.downstream_listed = len(listed)
    grouped = _by_key(listed)
    ledger = {row["operation_key"]: row for row in await conn.fetch(
        "SELECT logical_call_id, operation_key, state, succeeded_at FROM dispatcher.calls"
        " WHERE operation_key = ANY($1::text[])", list(grouped))}
    for key, effects in grouped.items():
        row = ledger.get(key)
        if row is None or (row["succeeded_at"] is None and row["state"] in NOT_APPLIED):
            result.findings.append(Finding(
                "downstream_not_in_ledger", tool, key, row and row["logical_call_id"],
                row and row["state"], tuple(effect.effect_id for effect in effects)))
    return result


def _by_key(effects: list[AuditedEffect]) -> dict[str, list[AuditedEffect]]:
    grouped: dict[str, list[AuditedEffect]] = {}
    for effect in effects:
        grouped.setdefault(effect.operation_key, []).append(effect)
    return grouped
