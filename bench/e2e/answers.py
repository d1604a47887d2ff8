"""The agents' side: reads each of the run's tenants' ``agent.results.<tenant>`` from its end as
the run starts and matches every answer to this run's proposals (accepted, refused, settled),
timestamped on arrival; an answer on another tenant's topic than its proposal's is counted as
``wrong_tenant`` (a failure). It reads every partition (the bench's runs are many); an agent of
the SDK reads only its run's."""

from __future__ import annotations

import asyncio
import json
import math
import time
from collections.abc import Callable
from datetime import datetime

from aiokafka import AIOKafkaConsumer

from bench.e2e.backlog import Backlog
from bench.e2e.names import RunNames, proposal_index
from bench.e2e.proposals import Proposals
from shared.contracts.intake import DUPLICATE_PROPOSAL, PROPOSAL_ACCEPTED, PROPOSAL_REJECTED
from shared.contracts.results import TOOL_CALL_SETTLED
from shared.messaging.admin import ensure_results_topics
from shared.messaging.kafka_security import client_options
from shared.topology import results_topic

PARTITIONS_PATIENCE_S = 10
"""How long a results topic just created may take to show its partitions (once seen: none)."""


class Answers:
    def __init__(self, names: RunNames, proposals: Proposals, bootstrap: str,
                 tenant_of: Callable[[int], str]) -> None:
        self.names = names
        self.proposals = proposals
        self.bootstrap = bootstrap
        self.tenant_of = tenant_of
        """The tenant of proposal ``i`` (``Load.tenant_of``)."""
        self.topics = [results_topic(tenant) for tenant in names.tenants]

    async def start(self, backlog: Backlog) -> None:
        self.results = AIOKafkaConsumer(**client_options(self.bootstrap),
                                        group_id=None, enable_auto_commit=False,
                                        max_poll_records=5000)
        await self.results.start()
        await ensure_results_topics(self.bootstrap, self.topics)  # as `intentledger tenants add`
        partitions = [partition for topic in self.topics
                      for partition in await self._partitions(backlog, topic)]
        self.results.assign(partitions)
        await self.results.seek_to_end(*partitions)
        for partition in partitions:  # resolve the end now: no answer can slip past
            await self.results.position(partition)

    @staticmethod
    async def _partitions(backlog: Backlog, topic: str) -> list:
        partitions = await backlog.partitions(topic)
        for _ in range(PARTITIONS_PATIENCE_S * 10):  # a topic just created: metadata lags
            if partitions:
                return partitions
            await asyncio.sleep(0.1)
            partitions = await backlog.partitions(topic)
        if not partitions:
            raise RuntimeError(f"{topic} has no partitions")
        return partitions

    async def stop(self) -> None:
        await self.results.stop()

    async def collect(self, stopping: asyncio.Event) -> None:
        prefix = self.names.prefix.encode()
        while not stopping.is_set():
            batch = await self.results.getmany(timeout_ms=100, max_records=5000)
            now = time.time()
            for records in batch.values():
                for record in records:
                    headers = dict(record.headers or ())
                    if not headers.get("run_id", b"").startswith(prefix):
                        continue
                    self._answer(record, now)

    def _answer(self, record, now: float) -> None:
        envelope = json.loads(record.value)
        payload = envelope.get("payload") or {}
        kind = envelope.get("event_type")
        proposals = self.proposals
        i = proposal_index(str(payload.get("call_id") or ""))
        if i is None or i >= len(proposals):
            proposals.answers["unmatched"] += 1
            return
        if record.topic != results_topic(self.tenant_of(i)):
            proposals.answers["wrong_tenant"] += 1
            return
        if kind == PROPOSAL_ACCEPTED:
            proposals.answers["accepted"] += 1
            if math.isnan(proposals.t_acc[i]):
                proposals.t_acc[i] = now
                proposals.accepted += 1
        elif kind in (DUPLICATE_PROPOSAL, PROPOSAL_REJECTED):
            proposals.answers["duplicate" if kind == DUPLICATE_PROPOSAL else "rejected"] += 1
            proposals.answers[f"reason:{payload.get('reason_code')}"] += 1
        elif kind == TOOL_CALL_SETTLED:
            proposals.answers["settled"] += 1
            proposals.settled_count[i] += 1
            proposals.settled_statuses[i].add(str(payload.get("status")))
            if math.isnan(proposals.t_set[i]):
                proposals.t_set[i] = now
                proposals.t_set_occurred[i] = \
                    datetime.fromisoformat(envelope["occurred_at"]).timestamp()
                proposals.status[i] = payload.get("status")
                proposals.settled += 1
