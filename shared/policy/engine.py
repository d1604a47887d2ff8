"""``evaluate``: one intent against one policy version, without I/O.

The policy service calls it when an intent arrives and again when an approval completes a
quorum; the dispatcher calls it at dispatch when the policy version changed since the
decision (docs/design.md §5.5), passing ``usage=None`` because rate and velocity limits were
counted when the call was first allowed, and passing the capability's approval chain so an
approval still counts as long as the current rule accepts its approver.

Order: deadline → first matching rule → its effect → amount cap → approvals → limits.
Limits are checked only on the way to an allow: they count allowed calls, and a call still
waiting for people has not been allowed yet.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from fnmatch import fnmatchcase
from typing import Any, Literal

from shared.policy.document import ApprovalRule, Limit, Policy, Rule
from shared.policy.limits import LimitUsage, Usage, applicable_limits, limit_refusal
from shared.contracts.authorizations import GrantedApproval, PolicyReason
from shared.contracts.intake import Intent
from shared.tools import ToolSpec
from shared.tools.paths import MISSING, parse_path, value_at

Effect = Literal["allow", "deny", "require_approval"]
Amount = tuple[int, str]
"""(minor units, ISO 4217 currency), as ``ToolSpec.cost_of`` reads it."""


@dataclass(frozen=True)
class Request:
    """What is judged: the intent, the money it moves, the instant, approvals collected."""

    intent: Intent
    amount: Amount | None
    now: datetime
    approvals: tuple[GrantedApproval, ...] = ()
    tool_requires_approval: bool = False
    """The registry says so (irreversible tools): no rule can waive it (docs/design.md §5.8)."""

    @classmethod
    def of(cls, intent: Intent, tool: ToolSpec, now: datetime,
           approvals: tuple[GrantedApproval, ...] = ()) -> Request:
        """``tool`` is the registry entry of the intent's tool name and version."""
        return cls(intent, tool.cost_of(intent.canonical_arguments), now, tuple(approvals),
                   tool.requires_approval)


@dataclass(frozen=True)
class Decision:
    effect: Effect
    policy_version: str
    rule: str | None
    reason: PolicyReason | None
    """Set for every deny; None otherwise."""
    message: str
    approval: ApprovalRule | None = None
    """For require_approval: who must approve, how many, for how long."""
    approvals: tuple[GrantedApproval, ...] = ()
    """For an allow that needed approval: the approvals that made the quorum."""
    limits: dict[str, Any] = field(default_factory=dict)
    """The cap and windows applied, with what was read, for the audit and the capability."""
    capability_ttl_seconds: int = 300


def evaluate(policy: Policy, request: Request, usage: Usage | None) -> Decision:
    """Pure. ``usage`` holds, for every limit ``applicable_limits`` names, what was allowed in
    its window so far; ``None`` skips rate and velocity limits."""
    intent = request.intent

    def decided(effect: Effect, rule: Rule | None, message: str,
                reason: PolicyReason | None = None, **details: Any) -> Decision:
        return Decision(effect, policy.version, rule.name if rule else None, reason, message,
                        capability_ttl_seconds=policy.capability_ttl_seconds, **details)

    if intent.deadline_at is not None and intent.deadline_at <= request.now:
        return decided("deny", None, "the intent's deadline has passed", PolicyReason.DEADLINE_PASSED)
    rule = next((rule for rule in policy.rules if matches(rule, intent)), None)
    if rule is None:
        return decided("deny", None, "no rule matches this call", PolicyReason.NO_MATCHING_RULE)
    if rule.effect == "deny":
        return decided("deny", rule, f"rule {rule.name} denies it", PolicyReason.DENIED_BY_RULE)
    applied: dict[str, Any] = {}
    needs_approval = rule.effect == "require_approval" or request.tool_requires_approval
    if needs_approval and rule.approval is None:
        return decided("deny", rule, f"{intent.tool_name} needs approval and rule {rule.name} "
                       "names no approvers", PolicyReason.NO_APPROVERS_FOR_TOOL)
    if rule.max_amount_minor is not None and request.amount is not None:
        amount, currency = request.amount
        applied["cap"] = {"max_amount_minor": rule.max_amount_minor, "currency": rule.currency,
                          "amount_minor": amount, "amount_currency": currency}
        if currency != rule.currency:
            return decided("deny", rule, f"the cap is in {rule.currency}, the call moves "
                           f"{currency}", PolicyReason.CAP_CURRENCY_MISMATCH, limits=applied)
        if amount > rule.max_amount_minor:
            if rule.over_cap == "deny":
                return decided("deny", rule, f"{amount} exceeds the cap of {rule.max_amount_minor} "
                               f"{currency}", PolicyReason.AMOUNT_OVER_CAP, limits=applied)
            needs_approval = True
    counted: tuple[GrantedApproval, ...] = ()
    if needs_approval:
        counted = approvals_counted(rule.approval, request)
        if len(counted) < rule.approval.quorum:
            return decided("require_approval", rule, f"needs {rule.approval.quorum} approval(s), "
                           f"has {len(counted)}", approval=rule.approval, limits=applied)
    if usage is not None:
        windows = []
        for limit in applicable_limits(policy, intent):
            if limit.name not in usage:
                raise ValueError(f"usage lacks limit {limit.name!r}: read every applicable limit")
            windows.append(_window(limit, usage[limit.name]))
            refusal = limit_refusal(limit, usage[limit.name], request.amount)
            if refusal is not None:
                applied["windows"] = windows
                return decided("deny", rule, refusal[1], refusal[0], limits=applied)
        applied["windows"] = windows
    return decided("allow", rule, f"allowed by rule {rule.name}", approvals=counted, limits=applied)


def matches(rule: Rule, intent: Intent) -> bool:
    if not (_any(rule.principals, intent.principal_id) and _any(rule.tenants, intent.tenant_id)
            and _any(rule.tools, intent.tool_name)):
        return False
    if rule.actions is not None and not _any(rule.actions, intent.tool_name.rsplit(".", 1)[-1]):
        return False
    if rule.resource_path is not None:
        value = value_at(intent.canonical_arguments, parse_path(rule.resource_path))
        return value is not MISSING and isinstance(value, str) and _any(rule.resources, value)
    return True


def approvals_counted(rule: ApprovalRule, request: Request) -> tuple[GrantedApproval, ...]:
    """One per approver, never the requester's, only approvers the rule names, only unexpired."""
    counted: dict[str, GrantedApproval] = {}
    for approval in request.approvals:
        if (not request.intent.is_requester(approval.approver_id)
                and _any(rule.approvers, approval.approver_id)
                and approval.expires_at > request.now
                and approval.approver_id not in counted):
            counted[approval.approver_id] = approval
    return tuple(counted.values())


def _window(limit: Limit, used: LimitUsage) -> dict[str, Any]:
    return {"name": limit.name, "scope": limit.scope, "window_seconds": limit.window_seconds,
            "max_calls": limit.max_calls, "max_amount_minor": limit.max_amount_minor,
            "currency": limit.currency, "calls_before": used.calls,
            "amount_minor_before": used.amount_minor}


def _any(patterns: tuple[str, ...], value: str) -> bool:
    return any(fnmatchcase(value, pattern) for pattern in patterns)


def resolution_rule(policy: Policy, operator_id: str, intent: Intent, outcome: str) -> str | None:
    """The name of the resolution rule letting ``operator_id`` settle this call as ``outcome``, or
    None. Pure, like ``evaluate``; the dispatcher asks it before applying a resolution."""
    if intent.is_requester(operator_id):
        return None
    return next((resolution.name for resolution in policy.resolutions
                 if _any(resolution.operators, operator_id) and _any(resolution.tenants, intent.tenant_id)
                 and _any(resolution.tools, intent.tool_name) and outcome in resolution.outcomes), None)
