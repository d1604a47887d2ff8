"""Where an agent's records go and where its answers come back: the public topics' names, a
tenant's own results topic, and the partition of it that a run's answers are on.

The server names and places its records with these very functions (``shared.topology``, the
relay), so an agent and the ledger cannot disagree about where an answer is.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from aiokafka.partitioner import DefaultPartitioner

AGENT_PROPOSALS = "agent.proposals"
AGENT_RESULTS = "agent.results"
"""A family of topics, one per tenant: ``results_topic(tenant)``."""
LEDGER_APPROVALS = "ledger.approvals"
"""People's approvals of calls, and the agents' withdrawals of their own (``Client.withdraw``)."""

TENANT_ID_PATTERN = r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?"
"""A DNS label (why: ``shared/contracts/tenants.py``); unanchored, for composing patterns."""
_TENANT_ID = re.compile(TENANT_ID_PATTERN)
_PARTITIONER = DefaultPartitioner()


def is_tenant_id(value: object) -> bool:
    return isinstance(value, str) and _TENANT_ID.fullmatch(value) is not None


def results_topic(tenant_id: str, family: str = AGENT_RESULTS) -> str:
    """The topic that carries tenant ``tenant_id``'s answers: only its agents may read it.
    ``family`` is the deployment's (or a test's) name of the family."""
    if not is_tenant_id(tenant_id):
        raise ValueError(f"{tenant_id!r} is not a tenant id (a DNS label)")
    return f"{family}.{tenant_id}"


def partition_for(key: bytes, partitions: Iterable[int]) -> int:
    """The partition of ``key`` among all of a topic's ``partitions`` (available or not: a
    key's partition must not move while a leader is away), by Kafka's default partitioner
    (murmur2), the one every Kafka client uses: the relay places each answer by its run id
    with it, and an agent reads only the partition its run goes to."""
    every = sorted(partitions)
    return int(_PARTITIONER(key, every, every))
