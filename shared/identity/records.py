"""Our envelope, consumed with the signature its producer put beside it.

Approvals and resolutions are our envelope, but people write them: the consumer that applies
them must check who signed the exact bytes it read, so its decoder keeps those bytes and the
record's ``intentledger-signature`` headers with the parsed envelope. Everything else about
the envelope is as ``decode_envelope`` makes it, so handlers of other events see no change.
"""

from __future__ import annotations

from aiokafka import ConsumerRecord
from pydantic import PrivateAttr

from shared.identity.signatures import HEADER
from shared.messaging.envelope import Envelope, decode


class SignedEnvelope(Envelope):
    _value: bytes = PrivateAttr(default=b"")
    _signatures: tuple[bytes, ...] = PrivateAttr(default=())

    @property
    def record_value(self) -> bytes:
        """The bytes the signature is over (never the envelope re-serialized)."""
        return self._value

    @property
    def signatures(self) -> tuple[bytes, ...]:
        return self._signatures


def decode_signed(record: ConsumerRecord) -> SignedEnvelope:
    envelope = SignedEnvelope.model_validate(
        decode(record.value, record.headers).model_dump())
    envelope._value = record.value or b""
    envelope._signatures = tuple(raw for name, raw in record.headers or () if name == HEADER)
    return envelope
