"""policy: decides each accepted intent (allow with a capability, deny, or ask for approval).

What other services may import (pure code and the file watcher; no database, no Kafka):

- ``load_policy(path) -> Policy`` (raises ``PolicyError``); ``Policy.version`` names it.
- ``PolicyWatcher(path, interval_s)``: ``.current`` is the latest valid version;
  ``await watcher.watch()`` reloads until cancelled.
- ``evaluate(policy, Request.of(intent, tool, now, approvals), usage) -> Decision``; pass
  ``usage=None`` to skip rate and velocity limits (they were counted at the first decision).
- ``repair_rule(policy, operator_id, intent, outcome)``: may this operator settle this call by hand?
"""

from services.policy.document import Policy
from services.policy.engine import Decision, Request, evaluate, repair_rule
from services.policy.limits import LimitUsage, Usage
from services.policy.loader import PolicyError, load_policy, parse_policy
from services.policy.watcher import PolicyWatcher

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
    "repair_rule",
]
