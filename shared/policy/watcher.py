"""Hot reload: the policy in force is the file's latest valid version.

The file is read at construction (a bad file stops the process at start-up, loudly) and again
every ``interval_s`` while ``watch`` runs. A new version becomes ``current`` only once it has
validated and ``on_activate`` has succeeded (the service records it in ``policy_versions``
first, so every decision names a version the database knows). A file that does not validate
is logged and the previous version stays in force: a typo never turns into "deny all" or
"allow all".
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path

from shared.policy.document import Policy
from shared.policy.loader import PolicyError, load_policy
from shared.errors import is_retryable

log = logging.getLogger(__name__)
OnActivate = Callable[[Policy], Awaitable[object]]


class PolicyWatcher:
    def __init__(self, path: str | Path, interval_s: float = 5.0) -> None:
        self.path = Path(path)
        self.interval_s = interval_s
        self.current: Policy = load_policy(self.path)
        """The version in force; read it per decision, never cache it."""

    async def reload(self, on_activate: OnActivate | None = None) -> Policy | None:
        """Read the file once; return the newly activated version, or None if none was."""
        try:
            candidate = load_policy(self.path)
        except PolicyError as error:
            log.error("policy file rejected, version %s stays in force: %s",
                      self.current.version, error)
            return None
        if candidate.version == self.current.version:
            return None
        if on_activate is not None:
            await on_activate(candidate)
        log.info("policy version %s activated (was %s)", candidate.version, self.current.version)
        self.current = candidate
        return candidate

    async def watch(self, on_activate: OnActivate | None = None) -> None:
        """Reload every ``interval_s`` until cancelled. An ``on_activate`` that fails
        transiently (the database is away) is retried at the next interval."""
        while True:
            await asyncio.sleep(self.interval_s)
            try:
                await self.reload(on_activate)
            except Exception as error:
                if not is_retryable(error):
                    raise
                log.warning("policy version not recorded yet (%s); retrying", error)
