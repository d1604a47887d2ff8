"""The system tools the local services need, and how to get them.

Java and Maven are only reported: installing a JDK is a choice the developer makes. The
PostgreSQL server is installed with apt when we run as root, because without it nothing
in the project runs and Debian's package is the one every machine of ours uses.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
from pathlib import Path

from shared.infra.errors import InfraError

APT_PACKAGES = {"java": "openjdk-17-jre-headless", "mvn": "maven"}


def require(tool: str) -> str:
    """Absolute path of ``tool`` on PATH, or an InfraError naming the apt package."""
    found = shutil.which(tool)
    if found is None:
        raise InfraError(f"{tool} not found: install it with `apt-get install -y {APT_PACKAGES[tool]}`")
    return found


def postgres_bindir() -> Path:
    """Directory holding initdb/pg_ctl, installing Debian's postgresql if we may."""
    found = _find_postgres_bindir()
    if found is None and os.geteuid() == 0 and shutil.which("apt-get"):
        command = "apt-get update && apt-get install -y postgresql"
        print(f"infra: PostgreSQL server not found, running `{command}`", flush=True)
        subprocess.run(command, shell=True, check=True,
                       env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"})
        found = _find_postgres_bindir()
    if found is None:
        raise InfraError("PostgreSQL server not found: install it with "
                         "`sudo apt-get update && sudo apt-get install -y postgresql`")
    return found


def _find_postgres_bindir() -> Path | None:
    """``pg_config --bindir`` names the client's bindir, which on Debian may lack initdb."""
    candidates: list[Path] = []
    if pg_config := shutil.which("pg_config"):
        result = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True)
        if result.returncode == 0:
            candidates.append(Path(result.stdout.strip()))
    candidates += sorted((Path(p) for p in glob.glob("/usr/lib/postgresql/*/bin")),
                         key=lambda p: _major(p.parent.name), reverse=True)
    return next((c for c in candidates if (c / "initdb").exists() and (c / "pg_ctl").exists()), None)


def _major(version: str) -> int:
    return int(version) if version.isdigit() else -1
