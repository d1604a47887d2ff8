"""The SCRAM credentials of a secure local broker (``intentledger infra up --secure``).

Generated once per home, random, and kept under ``<home>/kafka-secure/`` readable by its owner
only (0700 directory, 0600 files): ``credentials.json`` holds every user's password (the
broker's own and the admin's too), ``env/<user>.env`` the ``INTENTLEDGER_KAFKA_*`` settings a
process logs in with (``shared.messaging.kafka_security``; ``set -a; . env/policy.env``), and
``admin.properties`` the admin's login for Kafka's own command-line tools. Passwords never
change for the life of the data directory: the broker stores only their salted SCRAM hashes,
made by Kafka's tools from these files.
"""

from __future__ import annotations

import json
import os
import secrets
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

BROKER, ADMIN = "broker", "admin"
"""The super users: the broker itself (between its listeners) and the identity that provisions
users, ACLs and topics. Nobody else is a super user."""
MECHANISM = "SCRAM-SHA-512"
PROTOCOL = "SASL_PLAINTEXT"


def folder(home: Path) -> Path:
    return home / "kafka-secure"


def env_file(home: Path, user: str) -> Path:
    return folder(home) / "env" / f"{user}.env"


@dataclass(frozen=True)
class Credentials:
    passwords: dict[str, str]
    """Every user's password, the super users' included."""

    def password(self, user: str) -> str:
        return self.passwords[user]

    def env(self, user: str, bootstrap: str | None = None) -> dict[str, str]:
        """The settings a process logs in as ``user`` with."""
        env = {"INTENTLEDGER_KAFKA_SECURITY_PROTOCOL": PROTOCOL,
               "INTENTLEDGER_KAFKA_SASL_MECHANISM": MECHANISM,
               "INTENTLEDGER_KAFKA_SASL_USERNAME": user,
               "INTENTLEDGER_KAFKA_SASL_PASSWORD": self.password(user)}
        if bootstrap:
            env["INTENTLEDGER_KAFKA_BOOTSTRAP"] = bootstrap
        return env

    def client_kwargs(self, user: str) -> dict[str, str]:
        """aiokafka's keyword arguments to log in as ``user``."""
        return {"security_protocol": PROTOCOL, "sasl_mechanism": MECHANISM,
                "sasl_plain_username": user, "sasl_plain_password": self.password(user)}

    def jaas(self, user: str) -> str:
        """A SCRAM login of Kafka's JVM clients (the passwords are URL-safe: no quoting needed)."""
        return ("org.apache.kafka.common.security.scram.ScramLoginModule required "
                f'username="{user}" password="{self.password(user)}";')


def ensure(home: Path, users: Iterable[str]) -> Credentials:
    """The home's credentials, with a new random password for each user not yet known."""
    path = folder(home) / "credentials.json"
    known = json.loads(path.read_text()) if path.exists() else {}
    wanted = [BROKER, ADMIN, *users]
    passwords = {user: known.get(user) or secrets.token_urlsafe(24) for user in wanted}
    passwords |= {user: password for user, password in known.items() if user not in passwords}
    if passwords != known:
        _private(home, path, json.dumps(passwords, indent=2, sort_keys=True) + "\n")
    return Credentials(passwords)


def load(home: Path) -> Credentials:
    return Credentials(json.loads((folder(home) / "credentials.json").read_text()))


def write_client_files(home: Path, credentials: Credentials, bootstrap: str) -> None:
    """One env file per user, and the admin's properties for Kafka's tools."""
    for user in credentials.passwords:
        if user != BROKER:
            lines = "".join(f"{name}={value}\n"
                            for name, value in credentials.env(user, bootstrap).items())
            _private(home, env_file(home, user), lines)
    _private(home, admin_properties(home), f"security.protocol={PROTOCOL}\nsasl.mechanism={MECHANISM}\n"
                                     f"sasl.jaas.config={credentials.jaas(ADMIN)}\n")


def admin_properties(home: Path) -> Path:
    return folder(home) / "admin.properties"


def _private(home: Path, path: Path, text: str) -> None:
    """Written 0600 from the first byte (never readable by others, even for a moment), in
    folders only the owner may enter."""
    for directory in (folder(home), folder(home) / "env"):
        directory.mkdir(parents=True, exist_ok=True)
        os.chmod(directory, 0o700)
    scratch = path.with_name(f".{path.name}.{os.getpid()}")
    descriptor = os.open(scratch, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as file:
        file.write(text)
    os.replace(scratch, path)
