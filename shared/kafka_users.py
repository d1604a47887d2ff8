"""Every Kafka user of intentledger and the least-privilege ACLs it holds, derived from the
topology (``shared.topology``).

One derivation for every broker that authorizes: the local one of ``intentledger infra up
--secure`` is given exactly these ACLs (``shared.infra.kafka_acl_tool``), and the Strimzi
``KafkaUser`` objects of ``k8s/`` are tested to hold exactly these (``tests/unit/test_k8s.py``),
so a topic or consumer group added to the topology cannot be authorized in one and not the
other.

The rules, in the topology's words:

- a consuming service reads the topics its groups consume (Read, Describe, and DescribeConfigs:
  its inbox is kept as long as their ``retention.ms``) in its own groups (Read), and may only
  Describe the topics its outbox names (it checks at start that they exist), but for the
  tenants' results topics, which it never checks (the relay makes them);
- the relay writes every topic an outbox producer that runs writes, and the results topic of
  every tenant (created on a tenant's first answer: Create too, on the prefix);
- people's tools and the console write only what the topology says they write;
- a tenant's agent writes proposals and its withdrawals of them (on ``ledger.approvals``,
  where only an approver's signature approves anything, and where what it writes costs the
  policy as proposals cost the intake: the quota bounds both), and reads the results topic
  of its own tenant only: a LITERAL name, since the prefix ``agent.results.acme`` would also
  match ``agent.results.acme2``; it reads without a consumer group, so it holds no group ACL;
- the MCP gateway writes proposals for the agents it authenticates, of every tenant, and reads
  their answers: every tenant's results topic (the prefix), without a consumer group;
- the projection's health sampler reads every service group's lag: Describe on those groups
  and on every topic they consume, nothing more; so does KEDA's scaler in Kubernetes, for the
  groups of the services that run there.

Quotas (``quotas``) bound what the users outside the deployment may cost the brokers: a
tenant's agents. The intake's proposal rates are the business limit (calls per second per
tenant and principal); the broker's quota is the floor beneath it, so one agent flooding
bytes or requests slows only itself, before any of it reaches the intake.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass
from typing import Literal

from shared import topology

READ = ("Read", "Describe", "DescribeConfigs")
WRITE = ("Write", "Describe")
DESCRIBE = ("Describe",)
HEALTH_SAMPLER = "projection"
"""The service whose health sampler reads every consumer group's lag."""
OPERATOR, AGENT_PREFIX, SCALER = "operator", "agent-", "keda"


@dataclass(frozen=True)
class Quota:
    """A Kafka user's quota, in the broker's units: bytes per second (per broker), and the
    percentage of one request-handler or network thread's time."""

    producer_byte_rate: int
    consumer_byte_rate: int
    request_percentage: int

    def configs(self) -> dict[str, int]:
        """As the broker's user configs name them (``kafka-configs --add-config``)."""
        return {"producer_byte_rate": self.producer_byte_rate,
                "consumer_byte_rate": self.consumer_byte_rate,
                "request_percentage": self.request_percentage}


AGENT_QUOTA = Quota(producer_byte_rate=1024 * 1024, consumer_byte_rate=2 * 1024 * 1024,
                    request_percentage=50)
"""A tenant's agents together, per broker: 1 MiB/s of proposals is four messages of the
largest size the intake takes (256 KiB) or about a thousand one-call proposals, ten times the
default tenant rate (100 calls/s); answers are read at up to twice that."""


def agent_user(tenant: str) -> str:
    return f"{AGENT_PREFIX}{tenant}"


@dataclass(frozen=True, order=True)
class Acl:
    """One allowed (resource, operations) pair, spelled as Strimzi's ``KafkaUser`` spells it."""

    resource: Literal["topic", "group"]
    name: str
    pattern: Literal["literal", "prefix"] = "literal"
    operations: tuple[str, ...] = DESCRIBE


def kafka_users(deployed: Collection[str], tool_topics: Iterable[str] = (),
                tenants: Iterable[str] = (), *, scaler: bool = False
                ) -> dict[str, tuple[Acl, ...]]:
    """Per Kafka user (a service's name, ``relay``, ``operator``, ``query``, ``mcp-gateway``,
    ``agent-<tenant>``),
    its ACLs. ``deployed``: the services that run (the relay writes only what a running outbox
    producer emits); ``tool_topics``: the registry's Kafka tool topics, which the dispatcher
    emits beside the topology's; ``scaler``: also ``keda``, Kubernetes' autoscaler, which reads
    the lag of every running service's groups (Describe on them and what they consume)."""
    tools = tuple(sorted(set(tool_topics)))
    users = {service: _consumer(service, tools) for service in topology.CONSUMER_GROUPS
             if service in deployed}
    users[topology.RELAY] = _relay(deployed, tools)
    users[OPERATOR] = _writes(topology.OPERATORS)
    if topology.CONSOLE in deployed:
        users[topology.CONSOLE] = _writes(topology.CONSOLE)
    if topology.MCP_GATEWAY in deployed:
        users[topology.MCP_GATEWAY] = [*_writes(topology.MCP_GATEWAY), Acl(
            "topic", f"{topology.AGENT_RESULTS}.", "prefix", ("Read", "Describe"))]
    for tenant in tenants:
        users[agent_user(tenant)] = _agent(tenant)
    if scaler:
        users[SCALER] = _scaler(deployed)
    return {user: tuple(sorted(acls)) for user, acls in users.items()}


def _consumer(service: str, tools: tuple[str, ...]) -> list[Acl]:
    groups = topology.groups_of(service)
    consumed = [name for group in groups for name in topology.consumed_by(group)]
    acls = [Acl("topic", name, operations=READ) for name in consumed]
    acls += [Acl("group", group, operations=("Read",)) for group in groups]
    for topic in topology.TOPICS:
        if service in topic.producers and topic.name not in consumed and not topic.per_tenant:
            acls.append(Acl("topic", topic.name))
    if service == "dispatcher":
        acls += [Acl("topic", name) for name in tools if name not in consumed]
    if service == HEALTH_SAMPLER:
        acls += [Acl("group", group) for group in topology.SERVICE_GROUPS if group not in groups]
        acls += [Acl("topic", topic.name) for topic in topology.TOPICS
                 if topic.groups and topic.name not in consumed]
    return list(dict.fromkeys(acls))


def _relay(deployed: Collection[str], tools: tuple[str, ...]) -> list[Acl]:
    acls = []
    for topic in topology.TOPICS:
        if not any(p in topology.OUTBOX_PRODUCERS and p in deployed for p in topic.producers):
            continue
        if topic.per_tenant:  # created by the relay on a tenant's first answer
            acls.append(Acl("topic", f"{topic.name}.", "prefix", ("Write", "Create", "Describe")))
        else:
            acls.append(Acl("topic", topic.name, operations=WRITE))
    if "dispatcher" in deployed:
        acls += [Acl("topic", name, operations=WRITE) for name in tools]
    return acls


def _scaler(deployed: Collection[str]) -> list[Acl]:
    groups = [group for service in topology.CONSUMER_GROUPS if service in deployed
              for group in topology.groups_of(service)]
    consumed = [name for group in groups for name in topology.consumed_by(group)]
    return list(dict.fromkeys([*(Acl("topic", name) for name in consumed),
                               *(Acl("group", group) for group in groups)]))


def _writes(writer: str) -> list[Acl]:
    return [Acl("topic", topic.name, operations=WRITE) for topic in topology.TOPICS
            if writer in topic.producers]


def _agent(tenant: str) -> list[Acl]:
    return [*_writes(topology.AGENTS),
            Acl("topic", topology.results_topic(tenant), operations=("Read", "Describe"))]


def quotas(users: Iterable[str]) -> dict[str, Quota]:
    """The quota of each user that has one: every tenant's agent user."""
    return {user: AGENT_QUOTA for user in users if user.startswith(AGENT_PREFIX)}


def topics(tool_topics: Iterable[str] = (), tenants: Iterable[str] = ()) -> tuple[str, ...]:
    """Every topic a broker that creates none by itself must hold: the topology's, the results
    topic of each tenant in place of the family's name, and the registry's Kafka tool topics."""
    names = [topic.name for topic in topology.TOPICS if not topic.per_tenant]
    names += [topology.results_topic(tenant) for tenant in tenants]
    return tuple(dict.fromkeys([*names, *sorted(tool_topics)]))
