"""Could the policy ever allow a tool for a principal in a tenant, whatever the arguments?

Asked by the MCP gateway to list each caller only the tools worth offering it: a tool no call
could ever be allowed is noise to a model, and its name tells a caller what others may do. Pure,
like ``engine.evaluate``, and answered from the same first-match rules: walking them in order,
the first rule that matches the principal, tenant and tool for every call (no ``resource_path``)
decides, and any rule before it that matches only some calls (its resource) could decide for
those. So the answer is yes if an allow or require_approval rule is reached before an
unconditional deny, and that rule can let the tool out (a tool that needs approval needs a rule
with approvers). Limits and caps are not consulted: a call under them may be allowed.

This over-approximates, never under: a listed tool may still be denied for given arguments (its
resource, its amount), and then the call says why. It never hides a tool a call could use.
"""

from __future__ import annotations

from fnmatch import fnmatchcase

from shared.policy.document import Policy, Rule


def could_allow(policy: Policy, principal_id: str, tenant_id: str, tool_name: str, *,
                tool_requires_approval: bool = False) -> bool:
    for rule in policy.rules:
        if not _may_match(rule, principal_id, tenant_id, tool_name):
            continue
        if rule.effect != "deny" and not (tool_requires_approval and rule.approval is None):
            return True
        if rule.resource_path is None:  # every call of the tool reaches this rule: it decides
            return False
    return False  # no rule matches: no_matching_rule


def _may_match(rule: Rule, principal_id: str, tenant_id: str, tool_name: str) -> bool:
    action = tool_name.rsplit(".", 1)[-1]
    return (_any(rule.principals, principal_id) and _any(rule.tenants, tenant_id)
            and _any(rule.tools, tool_name)
            and (rule.actions is None or _any(rule.actions, action)))


def _any(patterns: tuple[str, ...], value: str) -> bool:
    return any(fnmatchcase(value, pattern) for pattern in patterns)
