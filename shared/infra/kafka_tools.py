"""Kafka's own command-line tools, run from the broker's jars as the admin user: SCRAM users and
quotas with ``kafka.admin.ConfigCommand`` and ACLs with ``org.apache.kafka.tools.AclCommand``.

Nothing here computes a SCRAM hash or speaks Kafka's admin protocol: the tools do (aiokafka's
admin client has no ACL or SCRAM API). ACLs are reconciled, as Strimzi's User Operator does:
the broker's ACLs are listed, those no longer wanted are removed and the missing ones added,
so ``up`` is idempotent and a home made by an older topology catches up. One JVM starts per
(pattern, resource kind, operations, names) group, the product of its principals, operations
and resources being what AclCommand adds in one call; each maps the class archive its tool's
first run wrote (``class_archive``).
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from shared.infra import class_archive
from shared.infra.errors import InfraError
from shared.infra.kafka_credentials import MECHANISM, admin_properties
from shared.kafka_users import Acl, Quota

TOOL_FLAGS = ["-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xmx256m"]
PARALLEL = 3
"""Tool JVMs at a time: each spends most of its second starting up, mostly on one core."""
Binding = tuple[str, str, str, str, str]
"""(user, resource kind, name, pattern, OPERATION): one ACL as the broker lists it."""
_LISTED_RESOURCE = re.compile(r"resourceType=(\w+), name=(.+?), patternType=(\w+)\)`")
_LISTED_QUOTAS = re.compile(r"Quota configs for user-principal '([^']+)' are (.*)")
_LISTED_ACL = re.compile(r"principal=User:([^,]+), host=\*, operation=(\w+), permissionType=ALLOW")


class Tools:
    def __init__(self, java: str, libs: Path, home: Path, bootstrap: str, log4j: Path) -> None:
        self._java, self._libs, self._home, self._bootstrap = java, libs, home, bootstrap
        self._log4j = log4j

    def run(self, main_class: str, *args: str) -> str:
        sharing, finish = class_archive.sharing(self._libs.parent / "class-archives", self._java,
                                                main_class)
        result = None
        try:
            result = subprocess.run(
                [self._java, *TOOL_FLAGS, *sharing, f"-Dlog4j2.configurationFile={self._log4j}",
                 "-cp", f"{self._libs}/*", main_class, "--bootstrap-server", self._bootstrap,
                 "--command-config", str(admin_properties(self._home)), *args],
                capture_output=True, text=True, timeout=180)
        finally:
            finish(result is not None and result.returncode == 0)
        if result.returncode != 0 or "Error while executing" in result.stdout:
            raise InfraError(f"{main_class.rsplit('.', 1)[-1]} {' '.join(args[:3])}… failed: "
                             f"{(result.stdout + result.stderr).strip()[-1500:]}")
        return result.stdout

    # -- SCRAM users --------------------------------------------------------------------------

    def users(self) -> set[str]:
        """The users the broker holds SCRAM credentials for."""
        listed = self.run("kafka.admin.ConfigCommand", "--describe", "--entity-type", "users")
        return set(re.findall(r"user-principal '([^']+)'", listed))

    def add_user(self, user: str, password: str) -> None:
        """A user added after the data directory was formatted (a newer topology, a new
        tenant). ConfigCommand takes SCRAM passwords on its command line only (its config
        file form refuses them), as ``kafka-storage format --add-scram`` does: for the second
        either runs, the password shows in this machine's process list."""
        self.run("kafka.admin.ConfigCommand", "--alter", "--entity-type", "users",
                 "--entity-name", user, "--add-config", f"{MECHANISM}=[password={password}]")

    # -- quotas ------------------------------------------------------------------------------

    def quotas(self) -> dict[str, dict[str, int]]:
        """Per user with a quota, its quota configs as the broker holds them."""
        listed = self.run("kafka.admin.ConfigCommand", "--describe", "--entity-type", "users")
        return {user: {name: int(float(value)) for name, value in
                       (config.split("=", 1) for config in configs.split(", "))}
                for user, configs in _LISTED_QUOTAS.findall(listed)}

    def reconcile_quotas(self, wanted: Mapping[str, Quota]) -> int:
        """Set each wanted quota the broker does not hold as wanted; returns how many were set.
        (A user whose quota is no longer wanted keeps it: only agents have one, and an agent
        user is never made into another kind.)"""
        held = self.quotas()
        differ = [(user, quota) for user, quota in wanted.items()
                  if held.get(user) != quota.configs()]
        with ThreadPoolExecutor(PARALLEL) as pool:
            list(pool.map(lambda pair: self.run(
                "kafka.admin.ConfigCommand", "--alter", "--entity-type", "users",
                "--entity-name", pair[0], "--add-config",
                ",".join(f"{name}={value}" for name, value in pair[1].configs().items())),
                differ))
        return len(differ)

    # -- ACLs ---------------------------------------------------------------------------------

    def acls(self) -> set[Binding]:
        found: set[Binding] = set()
        resource: tuple[str, str, str] | None = None
        for line in self.run("org.apache.kafka.tools.AclCommand", "--list").splitlines():
            if match := _LISTED_RESOURCE.search(line):
                kind, name, pattern = match.groups()
                resource = (kind.lower(), name, "prefix" if pattern == "PREFIXED" else "literal")
            elif (match := _LISTED_ACL.search(line)) and resource:
                found.add((match.group(1), *resource, match.group(2)))
        return found

    def reconcile(self, wanted: Mapping[str, Iterable[Acl]]) -> tuple[int, int]:
        """Make the broker's ACLs exactly ``wanted``; returns (added, removed)."""
        desired = {binding for user, acls in wanted.items() for binding in bindings(user, acls)}
        present = self.acls()
        stale, missing = present - desired, desired - present
        calls = [("--remove", "--force", *args) for args in _grouped(stale)]
        calls += [("--add", *args) for args in _grouped(missing)]
        with ThreadPoolExecutor(PARALLEL) as pool:
            list(pool.map(lambda args: self.run("org.apache.kafka.tools.AclCommand", *args), calls))
        return len(missing), len(stale)


def bindings(user: str, acls: Iterable[Acl]) -> set[Binding]:
    return {(user, acl.resource, acl.name, acl.pattern, _upper(operation))
            for acl in acls for operation in acl.operations}


def _grouped(found: set[Binding]) -> list[list[str]]:
    """AclCommand arguments, one call per (pattern, kind, operations, names), all its users."""
    by_user: dict[tuple[str, str, str], dict[str, set[str]]] = {}
    for user, kind, name, pattern, operation in found:
        by_user.setdefault((user, kind, pattern), {}).setdefault(name, set()).add(operation)
    calls: dict[tuple, set[str]] = {}
    for (user, kind, pattern), names in by_user.items():
        by_operations: dict[frozenset[str], set[str]] = {}
        for name, operations in names.items():
            by_operations.setdefault(frozenset(operations), set()).add(name)
        for operations, named in by_operations.items():
            calls.setdefault((pattern, kind, operations, frozenset(named)), set()).add(user)
    return [["--resource-pattern-type", "PREFIXED" if pattern == "prefix" else "LITERAL",
             *(arg for user in sorted(users) for arg in ("--allow-principal", f"User:{user}")),
             *(arg for op in sorted(operations) for arg in ("--operation", _camel(op))),
             *(arg for name in sorted(named) for arg in (f"--{kind}", name))]
            for (pattern, kind, operations, named), users in sorted(calls.items(), key=str)]


def _camel(operation: str) -> str:
    """What AclCommand's ``--operation`` takes: ``DescribeConfigs``."""
    return "".join(word.capitalize() for word in operation.split("_"))


def _upper(operation: str) -> str:
    """Strimzi's ``DescribeConfigs`` as the broker lists it: ``DESCRIBE_CONFIGS``."""
    return re.sub(r"(?<=[a-z])(?=[A-Z])", "_", operation).upper()
