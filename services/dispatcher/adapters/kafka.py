"""The Kafka effect adapter (⚑ ``shared/contracts/effect_requests.py``).

A request is an outbox row written in the same transaction that records the attempt, so it is
never sent without a durable record of it (docs/design.md §5.1), and the relay delivers it even if
this process dies right after the commit. The answer arrives later as a receipt on
``reply_topic``; no answer by the attempt's deadline is an UNKNOWN outcome.

Guarantees: at-least-once delivery of each request (the relay may publish one twice; the
downstream deduplicates by operation key), per-run order (the run id is the partition key),
and the fence on every request. It cannot guarantee that a downstream checks the fence or the
deadline: the reference wallet and warehouse do; for one that does not, a ``not_found`` lookup
is trusted only after every earlier attempt's deadline has passed.
"""

from __future__ import annotations

from services.dispatcher.adapters.orders import Order
from services.dispatcher.events import PRODUCER
from shared.contracts.effect_requests import (EFFECT_LOOKUP_REQUESTED, EFFECT_REQUESTED,
                                              EffectLookupRequested, EffectRequested)
from shared.db.unit_of_work import UnitOfWork
from shared.messaging.envelope import Envelope


def request(uow: UnitOfWork, order: Order, reply_topic: str) -> None:
    if order.kind == "send":
        event_type = EFFECT_REQUESTED
        payload = EffectRequested(
            operation_key=order.operation_key, tool_name=order.tool.name,
            tool_version=order.tool.version, canonical_arguments=order.canonical_arguments,
            attempt=order.attempt, fence=order.fence, tenant_id=order.tenant_id,
            logical_call_id=order.logical_call_id, deadline_at=order.deadline_at,
            reply_topic=reply_topic,
            capability=order.capability)
    else:
        event_type = EFFECT_LOOKUP_REQUESTED
        payload = EffectLookupRequested(
            operation_key=order.operation_key, tool_name=order.tool.name, attempt=order.attempt,
            fence=order.fence, tenant_id=order.tenant_id, logical_call_id=order.logical_call_id,
            reply_topic=reply_topic)
    uow.emit(order.tool.topic, Envelope.new(event_type=event_type, run_id=order.run_id,
                                            producer=PRODUCER,
                                            payload=payload.model_dump(mode="json")))
