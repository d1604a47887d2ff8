"""The policy library: the document, its evaluation and its file watcher. The policy service
decides each accepted intent with it (allow with a capability, deny, or ask for approval);
the dispatcher re-evaluates with it at dispatch. Pure code and a file watcher: no database,
no Kafka.

- ``load_policy(path) -> Policy`` (raises ``PolicyError``); ``Policy.version`` names it.
- ``PolicyWatcher(path, interval_s)``: ``.current`` is the latest valid version;
  ``await watcher.watch()`` reloads until cancelled.
- ``evaluate(policy, Request.of(intent, tool, now, approvals), usage) -> Decision``; pass
  ``usage=None`` to skip rate and velocity limits (they were counted at the first decision).
- ``resolution_rule(policy, operator_id, intent, outcome)``: may this operator settle this call by hand?
"""

from shared.policy.document import Policy
from shared.policy.engine import Decision, Request, evaluate, resolution_rule
from shared.policy.limits import LimitUsage, Usage
from shared.policy.loader import PolicyError, load_policy, parse_policy
from shared.policy.watcher import PolicyWatcher

__all__ = [
    "Decision",
    "LimitUsage",
    "Policy",
    "PolicyError",
    "PolicyWatcher",
    "Request",
    "Usage",
    "evaluate",
    "load_policy",
    "parse_policy",
    "resolution_rule",
]
