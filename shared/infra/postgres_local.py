"""A project-local PostgreSQL cluster run with the server binaries from Debian's package.

PostgreSQL refuses to run as root, so as root every server command runs as the
``postgres`` user through ``runuser`` and the directories it writes are handed to that user.
fsync stays on unless ``postgres_fast`` asks otherwise: crash-safety of commits is part of
what the project tests.
"""

from __future__ import annotations

import hashlib
import os
import pwd
import shlex
import shutil
import subprocess
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import asyncpg

from shared.config import Settings
from shared.db.roles import QUERY_LOGIN
from shared.infra import processes
from shared.infra.errors import InfraError

RUN_AS = "postgres"
SERVER_SETTINGS = {"shared_buffers": "512MB", "max_wal_size": "4GB", "checkpoint_timeout": "15min",
                   "random_page_cost": "1.1"}
"""What a production server is given (``k8s/base/postgres-cluster.yaml`` sets the same), not a
packaged server's defaults, sized for a small shared machine: 128 MB of buffers, which the
hot indexes of a few hours' ledger outgrow (backends then evict and write pages
themselves), and a checkpoint after every 1 GB of WAL, a few minutes at the benchmark's rates,
each followed by a full image of every page written again. Measured against the defaults in
bench/README.md ("PostgreSQL sized as a deployment"). And ``random_page_cost`` 1.1, an SSD's
(the packaged 4 is a spinning disk's): a statement planned once per connection
(``shared.db.plans``) is planned over tables a new deployment has not analysed yet, which at 4
it read whole rather than look its keys up, until autovacuum first analysed them
(bench/README.md, "Keys, not scans")."""
FALLBACK_ROOT = Path("/var/lib/postgresql/intentledger")


def server_root(home: Path) -> Path:
    """Where the cluster's data, socket and log live: ``home`` when the server user can reach
    it. As root, a checkout inside a private folder (``mktemp -d`` makes mode 0700) is out of
    the postgres user's reach; the cluster then lives under the server user's own
    /var/lib/postgresql, one folder per home, instead of failing in initdb."""
    if os.geteuid() != 0 or _reachable_by_server_user(home):
        return home
    return FALLBACK_ROOT / hashlib.sha256(str(home.resolve()).encode()).hexdigest()[:16]


def data_dir(home: Path) -> Path:
    """Also the marker that tells our postmaster apart from other PostgreSQL servers."""
    return server_root(home) / "pgdata"


def log_file(settings: Settings, home: Path) -> Path:
    root = server_root(home)
    return settings.logs_dir.resolve() / "postgres.log" if root == home else root / "postgres.log"


def url(port: int, database: str) -> str:
    return f"postgresql://postgres@127.0.0.1:{port}/{database}"


def running(home: Path) -> tuple[int, int] | None:
    """(pid, port) from ``postmaster.pid``, if that process still serves this data dir."""
    try:
        lines = (data_dir(home) / "postmaster.pid").read_text().splitlines()
        pid, port = int(lines[0]), int(lines[3])
    except (OSError, ValueError, IndexError):
        return None
    return (pid, port) if processes.is_alive(pid, str(data_dir(home))) else None


def start(settings: Settings, bindir: Path, home: Path, port: int) -> int:
    """Initialise the cluster once, start it detached, and return the postmaster's pid."""
    root = server_root(home)
    data, sockets, log = data_dir(home), root / "pg-run", log_file(settings, home)
    if root != home:
        root.mkdir(parents=True, exist_ok=True)
        _give_to_server_user(root)
    log.parent.mkdir(parents=True, exist_ok=True)
    log.touch()
    for path in (sockets, data):
        path.mkdir(mode=0o700, exist_ok=True)
    for path in (sockets, data, log):
        _give_to_server_user(path)
    if not (data / "PG_VERSION").exists():
        _run([bindir / "initdb", "-D", data, "-U", "postgres", "--auth=trust", "--encoding=UTF8",
              "--no-locale"], "initdb")
    # pg_stat_statements: the benchmark counts the statements a proposal costs (bench/e2e/).
    options = (f"-c listen_addresses=127.0.0.1 -p {port} -k {shlex.quote(str(sockets))}"
               " -c max_connections=300 -c shared_preload_libraries=pg_stat_statements "
               + " ".join(f"-c {name}={value}" for name, value in SERVER_SETTINGS.items()))
    if settings.postgres_fast:
        options += " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
    _run([bindir / "pg_ctl", "-D", data, "-l", log, "-w", "-t", "30", "-o", options, "start"], "pg_ctl start")
    if (serving := running(home)) is None:
        raise InfraError(f"PostgreSQL did not stay up; see {log}")
    return serving[0]


def stop(bindir: Path, home: Path, mode: str = "fast") -> None:
    """``fast``: sessions terminated, a checkpoint, a clean stop. ``immediate``: every process
    killed at once, no checkpoint; the next start runs crash recovery."""
    if running(home) is not None:
        _run([bindir / "pg_ctl", "-D", data_dir(home), "-m", mode, "-w", "-t", "30", "stop"], "pg_ctl stop")


async def ensure_database(port: int, name: str) -> None:
    """Create the application database and the query API's login on first start; a no-op
    afterwards. The login has no password: this cluster trusts loopback (``start``)."""
    connection = await asyncpg.connect(url(port, "postgres"), timeout=10)
    try:
        if not await connection.fetchval("SELECT 1 FROM pg_database WHERE datname = $1", name):
            await connection.execute(f'CREATE DATABASE "{name}"')
        if not await connection.fetchval("SELECT 1 FROM pg_roles WHERE rolname = $1", QUERY_LOGIN):
            await connection.execute(f"CREATE ROLE {QUERY_LOGIN} LOGIN NOINHERIT NOSUPERUSER "
                                     "NOBYPASSRLS NOCREATEDB NOCREATEROLE")
    finally:
        await connection.close()


def login_url(database_url: str, login: str = QUERY_LOGIN) -> str:
    """The same database as another login, without the password (loopback is trusted)."""
    parts = urlsplit(database_url)
    host = parts.hostname or "127.0.0.1"
    netloc = f"{login}@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))


def _run(command: list[object], what: str) -> None:
    argv = [str(part) for part in command]
    if os.geteuid() == 0:
        runuser = shutil.which("runuser", path=f"{os.environ.get('PATH', '')}:/usr/sbin:/sbin")
        if runuser is None:
            raise InfraError("runuser not found: install it with `apt-get install -y util-linux`")
        argv = [runuser, "-u", RUN_AS, "--", *argv]
    result = subprocess.run(argv, capture_output=True, text=True, start_new_session=True)
    if result.returncode != 0:
        raise InfraError(f"{what} failed: {(result.stdout + result.stderr).strip()[-2000:]}")


def _give_to_server_user(path: Path) -> None:
    if os.geteuid() == 0:
        user = pwd.getpwnam(RUN_AS)
        os.chown(path, user.pw_uid, user.pw_gid)


def _reachable_by_server_user(home: Path) -> bool:
    uid = pwd.getpwnam(RUN_AS).pw_uid
    for directory in [home, *home.parents]:
        if not directory.exists():
            continue
        info = directory.stat()
        if not (info.st_mode & 0o001 or (info.st_uid == uid and info.st_mode & 0o100)):
            return False
    return True
