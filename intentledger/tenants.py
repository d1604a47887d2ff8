"""``intentledger tenants add``: a tenant's results topic before its first answer.

The relay creates a missing one on first use anyway (services/relay/topics.py); creating it
ahead lets a deployment grant the tenant's Kafka user its ACL, and check the topic, before any
agent of the tenant runs, and it is the only way on a broker where the relay may not Create."""

from __future__ import annotations

from shared.contracts.tenants import is_tenant_id
from shared.messaging.admin import ensure_results_topics
from shared.topology import results_topic


class NotATenant(ValueError):
    pass


async def add_tenants(bootstrap: str, tenants: list[str], replicas: int) -> dict[str, bool]:
    """Each tenant's results topic → whether this call created it (False: it existed)."""
    if bad := [tenant for tenant in tenants if not is_tenant_id(tenant)]:
        raise NotATenant(f"not tenant ids (1-63 of a-z, 0-9, '-', not at either end): "
                         f"{', '.join(map(repr, bad))}")
    topics = [results_topic(tenant) for tenant in tenants]
    created = set(await ensure_results_topics(bootstrap, topics, replicas))
    return {topic: topic in created for topic in topics}
