"""What ``intentledger infra up --secure`` provisions, from the deployment's own files: a Kafka
user for every service ``intentledger serve`` runs, the operator, and one agent user per tenant
an agent acts for in the principals file; the Kafka tool topics of the tool registry.

The composition root's job (it reads the services' settings); the ACLs themselves are
``shared.kafka_users``'s, the broker ``shared.infra``'s.
"""

from __future__ import annotations

from collections.abc import Iterable

from services.dispatcher.settings import DispatcherSettings
from services.proposal_intake.settings import IntakeSettings
from shared import kafka_users
from shared.identity.principals import load_principals
from shared.infra.kafka_secure import SecurePlan
from shared.tools import load_registry


def plan(served: Iterable[str], tenants: Iterable[str] | None = None) -> SecurePlan:
    """``tenants``: the agents' tenants of the intake's principals file unless given."""
    registry = load_registry(DispatcherSettings().tools_file)
    tools = sorted({tool.topic for tool in registry.tools if tool.adapter == "kafka"})
    tenants = sorted(set(tenants) if tenants is not None else agent_tenants())
    return SecurePlan(users=kafka_users.kafka_users(set(served), tools, tenants),
                      topics=kafka_users.topics(tools, tenants))


def agent_tenants() -> set[str]:
    """Tenants named outright (not by a pattern such as ``*``) by an agent principal."""
    principals = load_principals(IntakeSettings().principals_file).principals
    return {tenant for principal in principals if principal.kind == "agent"
            for tenant in principal.tenants if not any(c in tenant for c in "*?[")}
