"""Rate and velocity limits: which apply to a call, and whether one more call fits.

A limit counts the calls the policy ALLOWED in its window (including those allowed after
approval), per principal or per tenant, for the tools it names. A velocity limit counts money
in its own currency only: a deployment that moves several currencies declares one limit per
currency, and a rule's cap (whose currency must match) stops calls in an unexpected one.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from fnmatch import fnmatchcase

from shared.policy.document import Limit, Policy
from shared.contracts.authorizations import PolicyReason
from shared.contracts.intake import Intent


@dataclass(frozen=True)
class LimitUsage:
    """What was allowed in a limit's window before this call."""

    calls: int = 0
    amount_minor: int = 0


Usage = Mapping[str, LimitUsage]
"""By limit name."""


@dataclass(frozen=True)
class AllowedTotal:
    """One row of the decisions store: allowed calls of one tool in one currency."""

    tool_name: str
    currency: str | None
    calls: int
    amount_minor: int


def applicable_limits(policy: Policy, intent: Intent) -> tuple[Limit, ...]:
    return tuple(limit for limit in policy.limits
                 if any(fnmatchcase(intent.tool_name, p) for p in limit.tools))


def usage_of(limit: Limit, totals: Iterable[AllowedTotal]) -> LimitUsage:
    calls = amount = 0
    for total in totals:
        if any(fnmatchcase(total.tool_name, pattern) for pattern in limit.tools):
            calls += total.calls
            if total.currency == limit.currency:
                amount += total.amount_minor
    return LimitUsage(calls, amount)


def limit_refusal(limit: Limit, used: LimitUsage,
                  amount: tuple[int, str] | None) -> tuple[PolicyReason, str] | None:
    if limit.max_calls is not None and used.calls + 1 > limit.max_calls:
        return (PolicyReason.RATE_LIMITED, f"limit {limit.name}: {used.calls} of "
                f"{limit.max_calls} calls already allowed in {limit.window_seconds}s")
    if limit.max_amount_minor is not None and amount is not None and amount[1] == limit.currency:
        if used.amount_minor + amount[0] > limit.max_amount_minor:
            return (PolicyReason.VELOCITY_LIMITED, f"limit {limit.name}: {used.amount_minor} + "
                    f"{amount[0]} exceeds {limit.max_amount_minor} {limit.currency} in "
                    f"{limit.window_seconds}s")
    return None
