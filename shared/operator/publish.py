"""Publishing one event from an operator's command (``approve``, ``reject``, ``resolve``).

Services never publish directly: they write outbox rows in the transaction of their state
change. An operator's command has no state of its own to keep consistent with the event, so it
publishes like any outside producer would: acks from all in-sync replicas, idempotent producer,
keyed by the run id (per-run order), the envelope's headers beside its value. A person's
decision also carries its signature (``Signer``): the policy and the dispatcher count it only
for the principal whose key made it (docs/identity.md).
"""

from __future__ import annotations

from dataclasses import dataclass

from aiokafka import AIOKafkaProducer

from shared.identity.signatures import HEADER, SigningKey, sign
from shared.messaging.envelope import Envelope
from shared.messaging.kafka_security import client_options


@dataclass(frozen=True)
class Signer:
    """Who signs a decision: a person with their own key (``person`` None), or a service that
    authenticates people itself (the console) with its key, naming the ``person`` it publishes
    for; only a principal with role ``publishes-for-people`` is believed about that."""

    key: SigningKey
    principal_id: str
    person: str | None = None

    @property
    def acting(self) -> str:
        """Whom the decision is the decision of: the id the record must name."""
        return self.person or self.principal_id

    def signature(self, value: bytes, *, tenant_id: str, use: str) -> str:
        return sign(value, self.key, principal_id=self.principal_id, tenant_id=tenant_id,
                    use=use, person=self.person)


async def publish(bootstrap: str, topic: str, *envelopes: Envelope,
                  signature: str | None = None) -> None:
    """``signature``: the ``intentledger-signature`` header of the one envelope published."""
    if signature is not None and len(envelopes) != 1:
        raise ValueError("a signature is over one record's value")
    producer = AIOKafkaProducer(**client_options(bootstrap), acks="all", enable_idempotence=True)
    await producer.start()
    try:
        for envelope in envelopes:
            headers = [(name, value.encode()) for name, value in envelope.headers().items()]
            if signature is not None:
                headers.append((HEADER, signature.encode()))
            await producer.send_and_wait(topic, envelope.value(), key=envelope.run_id.encode(),
                                         headers=headers)
    finally:
        await producer.stop()
