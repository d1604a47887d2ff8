"""How fast a tenant, and each of its principals, may propose: token buckets in PostgreSQL.

A run's budget bounds one run; nothing else bounded an agent stuck in a loop that opens run
after run, or a tenant whose agents together flood the ledger. Each identified message spends
one token per call it carries from two buckets, its tenant's and its principal's, refilled
continuously at a rate up to a burst. A message that either bucket cannot pay for is refused
whole (``proposal_rate_exceeded``, with how long to wait) and spends nothing, so an agent that waits and
sends it again is served.

The buckets live in the intake's own schema, so every intake replica draws on the same ones:
a limit holds however many replicas run, and across restarts. The rows are locked in the
consumer's transaction (tenant row first, then the principal's: one order, no deadlock), so
one tenant's messages are counted one after the other. Time is the database's clock, one for
every replica. Records whose signer could not be verified never reach a bucket: an attacker
who claims another tenant cannot spend that tenant's budget.
"""

from __future__ import annotations

from dataclasses import dataclass

import asyncpg

from shared import metric_catalog
from services.proposal_intake.repository import SCHEMA
from services.proposal_intake.settings import IntakeSettings

_REFUSED = metric_catalog.counter("intake.proposal_rate_exceeded")

TENANT_BUCKET = ""
"""The principal column of a tenant's own bucket (no principal id is empty)."""


@dataclass(frozen=True)
class Rate:
    per_second: float
    burst: float


@dataclass(frozen=True)
class Throttled:
    bucket: str
    """``tenant`` or ``principal``: whose budget was spent."""
    calls: int
    burst: float
    retry_after_s: float | None
    """None when no wait helps: the message carries more calls than the bucket holds."""

    @property
    def message(self) -> str:
        if self.retry_after_s is None:
            return (f"this message's {self.calls} calls exceed the {self.bucket}'s burst of "
                    f"{self.burst:g} calls: send them in smaller messages")
        return (f"the {self.bucket}'s proposal rate is spent: send again in "
                f"{self.retry_after_s:.1f} s (nothing of this message was recorded)")


def rates_for(tenant_id: str, settings: IntakeSettings) -> tuple[Rate, Rate]:
    """(tenant's, principal's): the tenant's own limits where it has them, else the defaults."""
    own = settings.tenant_limits.get(tenant_id)
    tenant = Rate(_first(getattr(own, "calls_per_second", None), settings.tenant_calls_per_second),
                  _first(getattr(own, "calls_burst", None), settings.tenant_calls_burst))
    principal = Rate(_first(getattr(own, "principal_calls_per_second", None),
                            settings.principal_calls_per_second),
                     _first(getattr(own, "principal_calls_burst", None),
                            settings.principal_calls_burst))
    return tenant, principal


async def spend(conn: asyncpg.Connection, tenant_id: str, principal_id: str, calls: int,
                settings: IntakeSettings) -> Throttled | None:
    """Take ``calls`` tokens from both buckets, or none and say which bucket is short."""
    tenant, principal = rates_for(tenant_id, settings)
    rows = await conn.fetch(
        f"INSERT INTO {SCHEMA}.rate_buckets AS b (tenant_id, principal_id, tokens, refreshed_at)"
        " SELECT $1, w.principal_id, w.burst, clock_timestamp()"
        "   FROM unnest($2::text[], $3::float8[]) WITH ORDINALITY AS w(principal_id, burst, n)"
        "  ORDER BY w.n "
        "ON CONFLICT (tenant_id, principal_id) DO UPDATE SET tokens = b.tokens "
        "RETURNING b.principal_id, b.tokens, b.refreshed_at, clock_timestamp() AS now",
        tenant_id, [TENANT_BUCKET, principal_id], [tenant.burst, principal.burst])
    by_bucket = {row["principal_id"]: row for row in rows}
    now = rows[0]["now"]
    available: dict[str, float] = {}
    for bucket, rate in ((TENANT_BUCKET, tenant), (principal_id, principal)):
        row = by_bucket[bucket]
        elapsed = max((now - row["refreshed_at"]).total_seconds(), 0.0)
        available[bucket] = min(rate.burst, row["tokens"] + rate.per_second * elapsed)
    for name, bucket, rate in (("tenant", TENANT_BUCKET, tenant),
                               ("principal", principal_id, principal)):
        if available[bucket] < calls:
            _REFUSED.add(calls, {"tenant": tenant_id, "bucket": name})
            wait = None if calls > rate.burst else (calls - available[bucket]) / rate.per_second
            return Throttled(name, calls, rate.burst, wait)
    await conn.execute(
        f"UPDATE {SCHEMA}.rate_buckets AS b SET tokens = w.tokens, refreshed_at = $4"
        "  FROM unnest($2::text[], $3::float8[]) AS w(principal_id, tokens)"
        " WHERE b.tenant_id = $1 AND b.principal_id = w.principal_id",
        tenant_id, [TENANT_BUCKET, principal_id],
        [available[TENANT_BUCKET] - calls, available[principal_id] - calls], now)
    return None


def _first(*values: float | None) -> float:
    return next(value for value in values if value is not None)
