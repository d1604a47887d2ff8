"""The deployment's policy as the dispatcher reads it: the same file the policy service reads,
hot-reloaded the same way, re-evaluated for one intent when its capability names an older
version. Rate and velocity limits are not counted again (the first decision counted them)."""

from __future__ import annotations

from datetime import UTC, datetime

from services.dispatcher.authority import Verdict
from shared.policy.engine import Request, evaluate, resolution_rule
from shared.policy.loader import PolicyError, load_policy
from shared.policy.watcher import PolicyWatcher
from shared.contracts.authorizations import GrantedApproval
from shared.contracts.intake import Intent
from shared.tools import ToolRegistry


class PolicyFile:
    def __init__(self, watcher: PolicyWatcher, registry: ToolRegistry) -> None:
        self.watcher = watcher
        self._registry = registry

    def current_version(self) -> str:
        return self.watcher.current.version

    def catch_up(self) -> None:
        """Adopt the file's version now if it is valid (a bad file keeps the one in force)."""
        try:
            self.watcher.current = load_policy(self.watcher.path)
        except PolicyError:
            pass  # the watcher logs it on its next round

    def evaluate(self, intent: Intent, approvals: tuple[GrantedApproval, ...] = ()) -> Verdict:
        tool = self._registry.resolve(intent.tool_name, intent.tool_version)
        request = Request.of(intent, tool, datetime.now(UTC), approvals)
        return evaluate(self.watcher.current, request, usage=None).effect

    def resolution_rule(self, operator_id: str, intent: Intent, outcome: str) -> str | None:
        return resolution_rule(self.watcher.current, operator_id, intent, outcome)
