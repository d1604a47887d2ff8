"""Evaluating calls with the usage of their rate and velocity limits, for one call or a batch.

Usage is read under the limits' scope locks (held until commit, so the next decision in the
same scope sees this one), every scope the batch counts in locked and every window read in
one statement each. Within the batch the calls are judged in order, each seeing the calls
allowed before it as if they were stored already: the same verdicts as judging them one by
one, each after the previous one's decision was written.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from services.policy import repository as repo
from shared.db.unit_of_work import UnitOfWork
from shared.policy.document import Limit, Policy
from shared.policy.engine import Decision, Request, evaluate
from shared.policy.limits import AllowedTotal, Usage, applicable_limits, usage_of


@dataclass(frozen=True)
class Judged:
    decision: Decision
    usage: Usage


async def judge(uow: UnitOfWork, policy: Policy, request: Request) -> Judged:
    return (await judge_all(uow, policy, [request]))[0]


async def judge_all(uow: UnitOfWork, policy: Policy, requests: list[Request]) -> list[Judged]:
    """``requests``: calls with no decision yet, each once, in the order they are decided."""
    limits = [applicable_limits(policy, request.intent) for request in requests]
    windows = sorted({_window(limit, request) for request, applicable in zip(requests, limits, strict=True)
                      for limit in applicable})
    totals: dict[repo.Window, list[AllowedTotal]] = {}
    if windows:
        # Both scopes, whatever this version counts per: a replica still on another version
        # may count the same calls per the other scope, and must wait for us all the same.
        await repo.lock_keys(uow.connection, "limit", [
            key for request, applicable in zip(requests, limits, strict=True) if applicable
            for key in (f"principal:{request.intent.principal_id}",
                        f"tenant:{request.intent.tenant_id}")])
        totals = dict(zip(windows, await repo.allowed_totals(uow.connection, windows), strict=True))
    judged = []
    for request, applicable in zip(requests, limits, strict=True):
        usage = {limit.name: usage_of(limit, totals[_window(limit, request)])
                 for limit in applicable}
        decision = evaluate(policy, request, usage)
        judged.append(Judged(decision, usage))
        if decision.effect == "allow" and request.intent.compensates is None:
            _count(totals, request)
    return judged


def _window(limit: Limit, request: Request) -> repo.Window:
    intent = request.intent
    counted = intent.tenant_id if limit.scope == "tenant" else intent.principal_id
    return limit.scope, counted, request.now - timedelta(seconds=limit.window_seconds)


def _count(totals: dict[repo.Window, list[AllowedTotal]], request: Request) -> None:
    """The allowed call, as its stored decision would be counted by the windows it falls in."""
    intent = request.intent
    minor, currency = request.amount if request.amount is not None else (0, None)
    for window, found in totals.items():
        scope, counted, since = window
        if counted == (intent.tenant_id if scope == "tenant" else intent.principal_id) \
                and request.now > since:
            found.append(AllowedTotal(intent.tool_name, currency, 1, minor))
