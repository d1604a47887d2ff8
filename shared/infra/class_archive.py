"""Class-data sharing for Kafka's tool JVMs: the first run of a tool writes the classes it
loaded to an archive (``-XX:ArchiveClassesAtExit``), and every later run maps them instead of
loading and verifying them again (``-XX:SharedArchiveFile``). On the 2-core machine a run of
ConfigCommand took 1.9 s without and 0.75 s with one; a secure ``infra up`` runs about thirty
tool JVMs (``kafka_tools``).

An archive belongs to one JVM build and one class path. The JVM ignores one that does not
match (``-Xshare:auto``), so a stale archive costs speed, never correctness. An archive is
written under a name of its own and renamed when its run succeeded: no run maps a half-written
one, and runs that create one at the same time each rename a whole one.
"""

from __future__ import annotations

import hashlib
import os
import uuid
from collections.abc import Callable
from pathlib import Path

QUIET = ["-Xshare:auto", "-Xlog:disable", "-Xlog:all=error:stderr"]
"""The JVM's own log on stdout would mix with the tool's output, which is parsed: writing an
archive warns on stdout of every class it cannot hold (dozens of slf4j's), and a mismatched
archive is warned about there too. Its errors still reach stderr."""


def sharing(folder: Path, java: str, main_class: str) -> tuple[list[str], Callable[[bool], None]]:
    """The JVM flags for one run of ``main_class``, and what to call with whether the run
    succeeded (it keeps an archive the run wrote, or drops it)."""
    try:
        archive = folder / f"{main_class}-{_jvm(java)}.jsa"
        if archive.is_file():
            return [*QUIET, f"-XX:SharedArchiveFile={archive}"], lambda _succeeded: None
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        # a cache this user cannot write to, or no JVM at ``java``: the tool runs without one
        return QUIET, lambda _succeeded: None
    written = folder / f"{archive.name}.{uuid.uuid4().hex}.tmp"

    def finish(succeeded: bool) -> None:
        if succeeded and written.is_file():
            os.replace(written, archive)
        else:
            written.unlink(missing_ok=True)

    return [*QUIET, f"-XX:ArchiveClassesAtExit={written}"], finish


def _jvm(java: str) -> str:
    """Which JVM: an archive of another build is useless to this one."""
    resolved = Path(java).resolve()
    stat = resolved.stat()
    return hashlib.sha256(f"{resolved}\0{stat.st_size}\0{stat.st_mtime_ns}".encode()).hexdigest()[:12]
