"""Hot reload of the policy (``shared/watched_file.py``): the version in force is the file's
latest valid one, recorded by the policy service before it decides under it."""

from __future__ import annotations

from pathlib import Path

from shared.policy.document import Policy
from shared.policy.loader import PolicyError, load_policy
from shared.watched_file import WatchedFile


class PolicyWatcher(WatchedFile[Policy]):
    def __init__(self, path: str | Path, interval_s: float = 5.0) -> None:
        super().__init__(path, load_policy, lambda policy: policy.version, PolicyError, "policy",
                         interval_s)
