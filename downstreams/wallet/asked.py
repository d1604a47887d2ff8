"""What the wallet is asked on Kafka, read from each admitted envelope: an effect request or a
lookup, the run whose fence scopes it, and where its receipt goes. The routing table
(``routes.py``) names the reader of each event type."""

from __future__ import annotations

from dataclasses import dataclass

from downstreams.wallet.answers import Lookup
from shared.contracts.effect_requests import EffectLookupRequested, EffectRequested
from shared.messaging.envelope import Envelope, parse
from shared.runs import RunKey


@dataclass(frozen=True)
class Asked:
    envelope: Envelope
    question: EffectRequested | Lookup
    reply_topic: str

    @property
    def fence(self) -> tuple[RunKey, int]:
        return RunKey(self.question.tenant_id, self.envelope.run_id), self.question.fence


def effect_requested(envelope: Envelope) -> Asked:
    asked = parse(envelope, EffectRequested)
    return Asked(envelope, asked, asked.reply_topic)


def lookup_requested(envelope: Envelope) -> Asked:
    asked = parse(envelope, EffectLookupRequested)
    return Asked(envelope, Lookup(run_id=envelope.run_id, **asked.model_dump(
        include={"operation_key", "fence", "attempt", "logical_call_id", "tenant_id"})),
        asked.reply_topic)
