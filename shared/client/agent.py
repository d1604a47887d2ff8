"""Submitting proposals and waiting for their outcomes on the tenant's ``agent.results.<tenant>``.

Every record is signed (docs/identity.md): with the key given, else the one the environment
names (``INTENTLEDGER_SIGNING_KEY``, a private JWK's JSON, or ``INTENTLEDGER_SIGNING_KEY_FILE``).
Without a key records go unsigned, and the intake refuses them ``signature_missing`` unless the
deployment accepts unsigned proposals for their tenant (local development only).

The client reads only its tenant's results topic, and of it only the partition its run id
goes to (the relay keys every answer by run id and places it with Kafka's default partitioner,
as ``partition_for`` does here), assigned directly: no consumer group, so an agent's Kafka user
needs nothing but Read on its tenant's topic. It is positioned at the end of that partition
*before* the proposal is sent, so no answer can slip past between sending and listening. A
tenant's topic is created when its first answer is written: if it does not exist yet, the
client sends anyway, waits for it to appear and reads it from the beginning (everything in a
topic created after it looked was written after it looked). An outcome that has not arrived by
the timeout is reported as ``pending``, never guessed: the intake may still answer, and a
proposal re-sent under the same operation key will be answered as a duplicate.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient

from shared.contracts.proposals import proposal_record_id
from shared.identity.signatures import (HEADER, PROPOSAL, SigningKey, load_signing_key, sign,
                                        signing_key_from_env)
from shared.messaging.envelope import payload_of
from shared.messaging.kafka_security import client_options
from shared.messaging.partitioning import partition_for
from shared.topology import AGENT_PROPOSALS, AGENT_RESULTS, results_topic
from shared.tracing import current_traceparent


@dataclass(frozen=True)
class Outcome:
    call_id: str
    status: str
    """accepted | duplicate | rejected | pending"""
    payload: dict[str, Any] = field(default_factory=dict)

    @property
    def reason_code(self) -> str | None:
        return self.payload.get("reason_code")


class ProposalClient:
    def __init__(self, bootstrap: str, *, run_id: str, principal_id: str, tenant_id: str,
                 signing_key: SigningKey | str | Path | None = None,
                 results_family: str = AGENT_RESULTS) -> None:
        self._bootstrap = bootstrap
        self._who = {"run_id": run_id, "principal_id": principal_id, "tenant_id": tenant_id}
        self._topic = results_topic(tenant_id, results_family)  # refuses an invalid tenant id
        self._one_at_a_time = asyncio.Lock()
        self._key = (load_signing_key(signing_key) if isinstance(signing_key, str | Path)
                     else signing_key or signing_key_from_env())

    async def __aenter__(self) -> ProposalClient:
        self._producer = AIOKafkaProducer(**client_options(self._bootstrap), acks="all",
                                          enable_idempotence=True)
        self._results = AIOKafkaConsumer(**client_options(self._bootstrap), group_id=None,
                                         enable_auto_commit=False)
        self._admin = AIOKafkaAdminClient(**client_options(self._bootstrap))
        await self._producer.start()
        await self._results.start()
        await self._admin.start()
        await self._listen(at_end=True)
        return self

    async def __aexit__(self, *_: object) -> None:
        await self._admin.close()
        await self._results.stop()
        await self._producer.stop()

    @property
    def partition(self) -> TopicPartition | None:
        """The one partition it reads; None until its tenant's topic exists."""
        return next(iter(self._results.assignment()), None)

    async def propose(self, tool: str, arguments: dict[str, Any], *, call_id: str,
                      tool_version: str | None = None, operation_key: str | None = None,
                      timeout: float = 30.0) -> Outcome:
        message = {"format": "generic", "tool": tool, "call_id": call_id, "arguments": arguments}
        [outcome] = await self.submit(_with(message, tool_version=tool_version,
                                            operation_key=operation_key), [call_id], timeout)
        return outcome

    async def propose_openai_chat(self, message: dict[str, Any], *, operation_keys:
                                  dict[str, str] | None = None, tool_version: str | None = None,
                                  timeout: float = 30.0) -> list[Outcome]:
        call_ids = [call["id"] for call in message.get("tool_calls") or []]
        envelope = {"format": "openai.chat", "message": message}
        return await self.submit(_with(envelope, operation_keys=operation_keys,
                                       tool_version=tool_version), call_ids, timeout)

    async def propose_anthropic(self, message: dict[str, Any], *, operation_keys:
                                dict[str, str] | None = None, tool_version: str | None = None,
                                timeout: float = 30.0) -> list[Outcome]:
        content = message.get("content")
        call_ids = [block["id"] for block in content if block.get("type") == "tool_use"] \
            if isinstance(content, list) else []
        envelope = {"format": "anthropic", "message": message}
        return await self.submit(_with(envelope, operation_keys=operation_keys,
                                       tool_version=tool_version), call_ids, timeout)

    async def propose_openai_responses(self, output: list[dict[str, Any]] | dict[str, Any], *,
                                       operation_keys: dict[str, str] | None = None,
                                       tool_version: str | None = None,
                                       timeout: float = 30.0) -> list[Outcome]:
        """``response.output`` items; results pair by ``call_id`` (not the ``fc_`` item id)."""
        items = output if isinstance(output, list) else [output]
        call_ids = [item["call_id"] for item in items if item.get("type") == "function_call"]
        envelope = {"format": "openai.responses", "output": output}
        return await self.submit(_with(envelope, operation_keys=operation_keys,
                                       tool_version=tool_version), call_ids, timeout)

    async def submit(self, message: dict[str, Any], call_ids: list[str],
                     timeout: float = 30.0) -> list[Outcome]:
        """Send one message of any format; one outcome per call id, in the caller's order.

        Answers are matched on the id of the record we sent (``proposal_id``), so a late
        answer to an earlier send that reused a call id is never taken for this one. One
        submission at a time per client: they share the results consumer. The record is signed
        just before it is sent (the signature lives two minutes); the agent's trace (the
        OpenTelemetry span in progress, if any) rides along in a ``traceparent`` header.
        """
        async with self._one_at_a_time:
            deadline = time.monotonic() + timeout
            value = json.dumps(self._who | message).encode()
            try:
                async with asyncio.timeout(timeout):
                    sent = await self._producer.send_and_wait(
                        AGENT_PROPOSALS, value, key=self._who["run_id"].encode(),
                        headers=self._headers(value) or None)
            except TimeoutError:
                return [Outcome(call_id, "pending") for call_id in call_ids]
            proposal_id = str(proposal_record_id(AGENT_PROPOSALS, sent.partition, sent.offset,
                                                 sent.timestamp, value))
            found = await self._await_outcomes(proposal_id, set(call_ids), deadline)
        return [found.get(call_id, Outcome(call_id, "pending")) for call_id in call_ids]

    def _headers(self, value: bytes) -> list[tuple[str, bytes]]:
        headers = []
        if self._key is not None:
            headers.append((HEADER, sign(value, self._key, principal_id=self._who["principal_id"],
                                         tenant_id=self._who["tenant_id"], use=PROPOSAL).encode()))
        if traceparent := current_traceparent():
            headers.append(("traceparent", traceparent.encode()))
        return headers

    async def _await_outcomes(self, proposal_id: str, call_ids: set[str],
                              deadline: float) -> dict[str, Outcome]:
        found: dict[str, Outcome] = {}
        while call_ids - set(found) and (left := deadline - time.monotonic()) > 0:
            if self.partition is None and not await self._listen(at_end=False):
                await asyncio.sleep(min(left, 0.2))  # the topic is not there yet
                continue
            batch = await self._results.getmany(timeout_ms=int(min(left, 0.5) * 1000))
            for record in (r for records in batch.values() for r in records):
                payload = payload_of(record.value)
                if payload.get("proposal_id") == proposal_id and payload.get("call_id") in call_ids:
                    found[payload["call_id"]] = Outcome(payload["call_id"], payload["outcome"], payload)
        return found

    async def _listen(self, *, at_end: bool) -> bool:
        """Assign the run's partition of the tenant's topic, if the topic exists, positioned
        at its end (resolved now, so later answers are all read) or, for a topic that did not
        exist when the client first looked, at its beginning. False while it does not exist.

        Existence is asked of the metadata of every topic the client may see: asking for the
        topic by name would let a broker that auto-creates topics create it, with its own
        partition count, instead of the relay with the family's."""
        described = await self._admin.describe_topics()
        partitions = next((topic["partitions"] for topic in described
                           if topic["topic"] == self._topic and topic["error_code"] == 0), None)
        if not partitions:
            return False
        key = self._who["run_id"].encode()
        partition = TopicPartition(self._topic,
                                   partition_for(key, [p["partition"] for p in partitions]))
        self._results.assign([partition])
        if at_end:
            await self._results.seek_to_end(partition)
        else:
            await self._results.seek_to_beginning(partition)
        await self._results.position(partition)
        return True


def _with(message: dict[str, Any], **optional: Any) -> dict[str, Any]:
    return message | {name: value for name, value in optional.items() if value is not None}
