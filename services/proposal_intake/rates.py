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
from datetime import datetime

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


@dataclass(frozen=True)
class Spending:
    """One message's claim on its tenant's and its principal's buckets."""

    tenant_id: str
    principal_id: str
    calls: int


@dataclass(frozen=True)
class Spent:
    """What a batch's messages were told, and the buckets' new state, to be written back in
    the same transaction (``written_back``: a CTE the caller's write statement takes)."""

    answers: list[Throttled | None]
    buckets: dict[tuple[str, str], float]
    now: datetime

    def written_back(self, first: int) -> tuple[str, list]:
        keys = sorted(self.buckets)
        return (f"buckets AS (UPDATE {SCHEMA}.rate_buckets AS b SET tokens = w.tokens,"
                f" refreshed_at = ${first + 3} FROM unnest(${first}::text[], ${first + 1}::text[],"
                f" ${first + 2}::float8[]) AS w(tenant_id, principal_id, tokens)"
                " WHERE b.tenant_id = w.tenant_id AND b.principal_id = w.principal_id)",
                [[t for t, _ in keys], [p for _, p in keys], [self.buckets[k] for k in keys],
                 self.now])


async def spend(conn: asyncpg.Connection, tenant_id: str, principal_id: str, calls: int,
                settings: IntakeSettings) -> Throttled | None:
    """Take ``calls`` tokens from both buckets, or none and say which bucket is short."""
    spent = await spend_all(conn, [Spending(tenant_id, principal_id, calls)], settings)
    cte, arguments = spent.written_back(1)
    await conn.execute(f"WITH {cte} SELECT 1", *arguments)
    return spent.answers[0]


async def spend_all(conn: asyncpg.Connection, spendings: list[Spending],
                    settings: IntakeSettings) -> Spent:
    """``spend`` for a batch of messages, in order, in one statement whatever their number:
    every bucket they draw on is locked at once (sorted by tenant, then principal, the
    tenant's own bucket first: one order for every taker, so no deadlock), and each message
    spends from what the ones before it left. The caller writes ``Spent`` back."""
    rates = {s.tenant_id: rates_for(s.tenant_id, settings) for s in spendings}
    bursts = {(t, TENANT_BUCKET): rates[t][0].burst for t in rates}
    bursts |= {(s.tenant_id, s.principal_id): rates[s.tenant_id][1].burst for s in spendings}
    keys = sorted(bursts)
    rows = await conn.fetch(
        f"INSERT INTO {SCHEMA}.rate_buckets AS b (tenant_id, principal_id, tokens, refreshed_at)"
        " SELECT w.tenant_id, w.principal_id, w.burst, clock_timestamp()"
        "   FROM unnest($1::text[], $2::text[], $3::float8[]) WITH ORDINALITY"
        "        AS w(tenant_id, principal_id, burst, n)"
        "  ORDER BY w.n "
        "ON CONFLICT (tenant_id, principal_id) DO UPDATE SET tokens = b.tokens "
        "RETURNING b.tenant_id, b.principal_id, b.tokens, b.refreshed_at, clock_timestamp() AS now",
        [t for t, _ in keys], [p for _, p in keys], [bursts[key] for key in keys])
    now = max(row["now"] for row in rows)
    available: dict[tuple[str, str], float] = {}
    for row in rows:
        key = (row["tenant_id"], row["principal_id"])
        tenant, principal = rates[key[0]]
        rate = tenant if key[1] == TENANT_BUCKET else principal
        elapsed = max((now - row["refreshed_at"]).total_seconds(), 0.0)
        available[key] = min(rate.burst, row["tokens"] + rate.per_second * elapsed)
    return Spent([_spent(available, s, rates[s.tenant_id]) for s in spendings], available, now)


def _spent(available: dict[tuple[str, str], float], spending: Spending,
           rates: tuple[Rate, Rate]) -> Throttled | None:
    """Spend one message's calls from ``available`` (both buckets or neither)."""
    buckets = (("tenant", (spending.tenant_id, TENANT_BUCKET), rates[0]),
               ("principal", (spending.tenant_id, spending.principal_id), rates[1]))
    for name, key, rate in buckets:
        if available[key] < spending.calls:
            _REFUSED.add(spending.calls, {"tenant": spending.tenant_id, "bucket": name})
            wait = (None if spending.calls > rate.burst
                    else (spending.calls - available[key]) / rate.per_second)
            return Throttled(name, spending.calls, rate.burst, wait)
    for _, key, _ in buckets:
        available[key] -= spending.calls
    return None


def _first(*values: float | None) -> float:
    return next(value for value in values if value is not None)
