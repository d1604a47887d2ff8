"""Hot reload of a configuration file (the policy, the principals): the version in force is the
file's latest valid version.

The file is read at construction (a bad file stops the process at start-up, loudly) and again
every ``interval_s`` while ``watch`` runs. A new version becomes ``current`` only once it has
validated and ``on_activate`` has succeeded (the policy service records the version first, so
every decision names a version the database knows). A file that does not validate is logged
and the previous version stays in force: a typo never turns into "deny all" or "allow all".
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Generic, TypeVar

from shared.errors import is_retryable

log = logging.getLogger(__name__)
Document = TypeVar("Document")


class WatchedFile(Generic[Document]):
    def __init__(self, path: str | Path, load: Callable[[Path], Document],
                 version: Callable[[Document], str], refused: type[Exception], what: str,
                 interval_s: float = 5.0) -> None:
        self.path = Path(path)
        self.interval_s = interval_s
        self._load, self._version, self._refused, self._what = load, version, refused, what
        self.current: Document = load(self.path)
        """The version in force; read it per use, never cache it."""

    async def reload(self, on_activate: Callable[[Document], Awaitable[object]] | None = None
                     ) -> Document | None:
        """Read the file once; return the newly activated version, or None if none was."""
        try:
            candidate = self._load(self.path)
        except self._refused as error:
            log.error("%s file rejected, version %s stays in force: %s", self._what,
                      self._version(self.current), error)
            return None
        if self._version(candidate) == self._version(self.current):
            return None
        if on_activate is not None:
            await on_activate(candidate)
        log.info("%s version %s activated (was %s)", self._what, self._version(candidate),
                 self._version(self.current))
        self.current = candidate
        return candidate

    async def watch(self, on_activate: Callable[[Document], Awaitable[object]] | None = None
                    ) -> None:
        """Reload every ``interval_s`` until cancelled. An ``on_activate`` that fails
        transiently (the database is away) is retried at the next interval."""
        while True:
            await asyncio.sleep(self.interval_s)
            try:
                await self.reload(on_activate)
            except Exception as error:
                if not is_retryable(error):
                    raise
                log.warning("%s version not recorded yet (%s); retrying", self._what, error)
