"""The secure local broker (``intentledger infra up --secure``): it authenticates and authorizes
like a production cluster, so tenant isolation can be proven on a real broker.

Clients log in over SASL_PLAINTEXT with SCRAM-SHA-512; KRaft's ``StandardAuthorizer`` denies
whatever no ACL allows (``allow.everyone.if.no.acl.found=false``); the only super users are the
broker itself and the admin that provisions; nothing is created by its first use (auto topic
creation is off). The controller listener cannot use SCRAM (its credentials live in the very
metadata the controller serves), so the broker logs in to it with PLAIN and a password only
the broker's config holds: no anonymous connection is a super user on either port.

Provisioning, after the broker answers: the SCRAM users (those known when the data directory
is formatted are created by ``kafka-storage format --add-scram``, the supported way for KRaft;
later ones by ConfigCommand), the ACLs and quotas of ``shared.kafka_users`` reconciled with
AclCommand and ConfigCommand, and every topic, created by the admin (no service may create one).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from shared import topology
from shared.infra.kafka_credentials import ADMIN, BROKER, MECHANISM, Credentials
from shared.infra.kafka_tools import Tools
from shared.kafka_users import Acl, Quota, quotas
from shared.messaging.admin import ensure_results_topics, ensure_topics

PARTITIONS = 8
"""As ``shared.messaging.admin.ensure_topics`` would have made them."""


@dataclass(frozen=True)
class SecurePlan:
    """What a secure broker is provisioned with: its users' ACLs and quotas, and the topics
    that exist."""

    users: Mapping[str, tuple[Acl, ...]]
    topics: tuple[str, ...]
    partitions: int = PARTITIONS

    @property
    def quotas(self) -> dict[str, Quota]:
        return quotas(self.users)


def listeners(port: int, controller_port: int, credentials: Credentials) -> str:
    broker = credentials.password(BROKER)
    plain = ("org.apache.kafka.common.security.plain.PlainLoginModule required "
             f'username="{BROKER}" password="{broker}" user_{BROKER}="{broker}";')
    return f"""listeners=CLIENT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}
advertised.listeners=CLIENT://127.0.0.1:{port}
inter.broker.listener.name=CLIENT
listener.security.protocol.map=CLIENT:SASL_PLAINTEXT,CONTROLLER:SASL_PLAINTEXT
sasl.enabled.mechanisms={MECHANISM}
sasl.mechanism.inter.broker.protocol={MECHANISM}
listener.name.client.{MECHANISM.lower()}.sasl.jaas.config={credentials.jaas(BROKER)}
sasl.mechanism.controller.protocol=PLAIN
listener.name.controller.sasl.enabled.mechanisms=PLAIN
listener.name.controller.plain.sasl.jaas.config={plain}
authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer
allow.everyone.if.no.acl.found=false
super.users=User:{BROKER};User:{ADMIN}
auto.create.topics.enable=false
"""


def format_arguments(credentials: Credentials) -> list[str]:
    """Every user known now is created with the data directory (the broker needs its own
    credentials before it can serve at all)."""
    return [argument for user, password in sorted(credentials.passwords.items())
            for argument in ("--add-scram", f"{MECHANISM}=[name={user},password={password}]")]


def provision(tools: Tools, credentials: Credentials, plan: SecurePlan, bootstrap: str) -> str:
    """Users, ACLs and topics as the plan says; returns what was done, for the log."""
    known = tools.users()
    missing = [user for user in (ADMIN, *plan.users) if user not in known]
    for user in missing:
        tools.add_user(user, credentials.password(user))
    added, removed = tools.reconcile(plan.users)
    limited = tools.reconcile_quotas(plan.quotas)
    created = asyncio.run(create_topics(bootstrap, credentials, plan.topics, plan.partitions))
    return (f"{len(plan.users)} users ({len(missing)} new), ACLs {added} added {removed} removed, "
            f"{limited} quotas set, {created} topics created")


async def create_topics(bootstrap: str, credentials: Credentials, names: Iterable[str],
                        partitions: int) -> int:
    """As the admin; tenants' results topics as the relay would make them on first use."""
    login = credentials.client_kwargs(ADMIN)
    family = topology.results_topics()
    results = [name for name in names if family.match(name)]
    others = [name for name in names if name not in results]
    created = await ensure_topics(bootstrap, others, partitions, login=login)
    created += await ensure_results_topics(bootstrap, results, login=login)
    return len(created)
