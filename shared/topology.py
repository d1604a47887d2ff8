"""Every Kafka topic of intentledger: what it carries, who writes it, who reads it, its key.

The one place a reader learns the pipeline's wiring. Everything else that names topics or
consumer groups is derived from this table or tested against it: the services' settings
defaults, the consumer groups that lag is counted in, the README's topic table
(``python -m shared.topology --readme``), the AsyncAPI channels, the Strimzi topics and ACLs
and the KEDA lag triggers (``tests/unit/test_topology.py``).

A service's *records* are written to its outbox in the transaction that changes its state
and reach Kafka only through the relay; so the relay is the Kafka writer of every topic whose
producer is a service of ours, and only people's tools, agents and downstream systems write
directly.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass

from intentledger_client.topics import (AGENT_PROPOSALS, AGENT_RESULTS, LEDGER_APPROVALS,
                                        TENANT_ID_PATTERN)
from intentledger_client.topics import results_topic as results_topic  # the agent's own rule

LEDGER_INTAKE = "ledger.intake"
LEDGER_AUTHORIZATIONS = "ledger.authorizations"
LEDGER_RESOLUTIONS = "ledger.resolutions"
LEDGER_COMPENSATIONS = "ledger.compensations"
LEDGER_DISPATCH = "ledger.dispatch"
LEDGER_EFFECTS = "ledger.effects"
EFFECT_RECEIPTS = "effects.receipts"
EFFECTS_WALLET = "effects.wallet"
EFFECTS_WAREHOUSE = "effects.warehouse"

OUTBOX_PRODUCERS = frozenset({"proposal-intake", "policy", "dispatcher", "wallet", "warehouse"})
"""Producers whose records go through an outbox (and so the relay)."""
RELAY = "relay"
AGENTS = "agents"
OPERATORS = "operators"
"""People, through ``intentledger approve | reject | resolve``."""
CONSOLE = "query"
"""The operator console's resolve form, served by the query service as the signed-in person."""
MCP_GATEWAY = "mcp-gateway"
"""Proposes for the agents it authenticates, of any tenant, reads their answers, and withdraws
their calls awaiting approval (an MCP client's ``tasks/cancel``)."""
DOWNSTREAMS = "downstream systems"


@dataclass(frozen=True)
class Topic:
    name: str
    carries: str
    schema: str
    """The JSON Schema of its records, under ``schemas/``."""
    key: str
    """What the Kafka record key is: ordering holds per key."""
    producers: tuple[str, ...]
    groups: tuple[str, ...]
    """Our consumer groups that read it (outside readers use groups of their own)."""
    public: bool
    """Part of the public contract: agents, people or downstream systems use it."""
    per_tenant: bool = False
    """A family of topics named ``<name>.<tenant>``, one per tenant (``results_topic``)."""

    @property
    def address(self) -> str:
        """How documents name it: the family's topics as ``<name>.{tenant}``."""
        return f"{self.name}.{{tenant}}" if self.per_tenant else self.name

    @property
    def kafka_writers(self) -> tuple[str, ...]:
        """Who holds Write on it: the relay for an outbox producer, else the producer itself."""
        return tuple(dict.fromkeys(RELAY if producer in OUTBOX_PRODUCERS else producer
                                   for producer in self.producers))


TOPICS = (
    Topic(AGENT_PROPOSALS, "proposals from agents (generic, OpenAI or Anthropic shapes)",
          "agent.proposals.schema.json", "run id", (AGENTS, MCP_GATEWAY), ("proposal-intake",),
          True),
    Topic(AGENT_RESULTS, "one answer per proposed call, then its settled outcome; one topic "
          "per tenant, only its agents read it",
          "agent.results.schema.json", "run id", ("proposal-intake", "policy", "dispatcher"),
          (), True, per_tenant=True),
    Topic(LEDGER_INTAKE, "accepted intents and the intake's other answers",
          "ledger.intake.schema.json", "run id", ("proposal-intake",), ("policy", "projection"),
          False),
    Topic(LEDGER_APPROVALS, "people's approvals and refusals of an intent, and the "
          "withdrawals of its agent while it waits", "ledger.approvals.schema.json", "run id",
          (OPERATORS, AGENTS, MCP_GATEWAY), ("policy",), True),
    Topic(LEDGER_AUTHORIZATIONS, "the policy's decisions: allowed with a capability, denied, "
          "awaiting approval", "ledger.authorizations.schema.json", "run id", ("policy",),
          ("dispatcher", "projection"), False),
    Topic(LEDGER_RESOLUTIONS, "operators' resolutions of intents reconciliation could not "
          "settle, and their cancellations of runs", "ledger.resolutions.schema.json", "run id",
          (OPERATORS, CONSOLE), ("dispatcher-priority", "policy"), True),
    Topic(LEDGER_COMPENSATIONS, "compensations the dispatcher proposes, sealed with its key",
          "ledger.compensations.schema.json", "run id", ("dispatcher",), ("policy",), False),
    Topic(LEDGER_DISPATCH, "the dispatcher's lifecycle of each intent",
          "ledger.dispatch.schema.json", "run id", ("dispatcher",), ("projection",), False),
    Topic(LEDGER_EFFECTS, "committed business effects, with their audit trail",
          "ledger.effects.schema.json", "run id", ("dispatcher",), ("projection",), True),
    Topic(EFFECT_RECEIPTS, "downstream systems' receipts for effect requests and lookups",
          "effects.receipts.schema.json", "run id", ("wallet", "warehouse", DOWNSTREAMS),
          ("dispatcher-priority",), True),
    Topic(EFFECTS_WALLET, "effect requests for the reference wallet's tools",
          "effects.requests.schema.json", "run id", ("dispatcher",), ("wallet",), True),
    Topic(EFFECTS_WAREHOUSE, "effect requests for the reference warehouse's tools",
          "effects.requests.schema.json", "run id", ("dispatcher",), ("warehouse",), True),
)
BY_NAME = {topic.name: topic for topic in TOPICS}

RESULTS_PARTITIONS = 4
"""Partitions of each tenant's results topic. An agent reads only the partition its run id
hashes to, so more partitions mean less of its tenant's traffic read by each agent; fewer mean
less cost per tenant (a broker carries a few thousand partitions well: 4 per tenant leaves room
for hundreds of tenants per broker). The relay creates the topic with this count on first use
and ``intentledger tenants add`` ahead of it; both agree with the Strimzi examples."""


def results_topics(family: str = AGENT_RESULTS) -> re.Pattern[str]:
    """Every tenant's results topic of ``family`` and nothing else, for operators' tools that
    read them all (a subscription pattern; the tenant is the topic name's last part)."""
    return re.compile(rf"^{re.escape(family)}\.({TENANT_ID_PATTERN})$")


PRIORITY_SUFFIX = "-priority"


def priority_group(service: str) -> str:
    """The consumer group of a service's priority lane (``ConsumerService.priority``)."""
    return f"{service}{PRIORITY_SUFFIX}"


def service_of(group: str) -> str:
    return group.removesuffix(PRIORITY_SUFFIX)


def groups_of(service: str) -> tuple[str, ...]:
    """The consumer groups a service's processes consume in, in topology order."""
    return tuple(dict.fromkeys(group for topic in TOPICS for group in topic.groups
                               if service_of(group) == service))


def consumed_by(group: str) -> tuple[str, ...]:
    return tuple(topic.name for topic in TOPICS if group in topic.groups)


CONSUMER_GROUPS = {service: groups_of(service) for service in dict.fromkeys(
    service_of(group) for topic in TOPICS for group in topic.groups)}
"""Per consuming service, its consumer groups: what quiescence checks, lag samples and the
benchmark count from."""
SERVICE_GROUPS = tuple(group for groups in CONSUMER_GROUPS.values() for group in groups)


def readme_table() -> str:
    """The README's topic table (between its ``topics:begin`` / ``topics:end`` markers)."""
    rows = ["| topic | carries | producer | consumer groups | schema | key |",
            "|---|---|---|---|---|---|"]
    for topic in TOPICS:
        name = f"`{topic.address}`" + (" ⚑" if topic.public else "")
        groups = ", ".join(f"`{group}`" for group in topic.groups) or (
            "none: each agent reads its run's partition" if topic.per_tenant
            else "agents' own groups")
        rows.append(f"| {name} | {topic.carries} | {', '.join(topic.producers)} | {groups} "
                    f"| [{topic.schema}](schemas/{topic.schema}) | {topic.key} |")
    return "\n".join(rows)


if __name__ == "__main__":
    if sys.argv[1:] != ["--readme"]:
        sys.exit("usage: python -m shared.topology --readme")
    print(readme_table())
