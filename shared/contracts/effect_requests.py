"""⚑ The Kafka effect adapter: how the dispatcher asks a downstream system for an effect.

The dispatcher publishes, on the tool's topic (the registry's ``topic``, e.g. ``effects.wallet``):

- ``EffectRequested``: perform this intent, keyed by ``operation_key``. Every attempt of one
  intent carries the same key; the downstream applies it at most once and answers a repeat with
  the answer it recorded the first time.
- ``EffectLookupRequested``: reconciliation's question "did this key take effect?". It never
  applies anything.

The downstream answers each with one ``EffectReceiptIssued`` envelope on ``reply_topic``.

Fencing: every request carries the dispatcher's lease generation (``fence``) for the run. A
downstream that checks fences remembers the highest fence seen per run and answers a lower one
with ``stale`` without looking further: a worker that was paused, lost its lease and woke up
cannot apply anything through a resource that checks. A lookup raises the remembered fence too,
so once the new owner has asked, no request of the old owner can land afterwards.

Authority: an ``EffectRequested`` carries the policy's signed capability for its intent, so a
downstream can check for itself that the policy allowed exactly this key, tool, tenant and
arguments (``shared.downstream.capability_check``): a row written into some service's outbox
by whoever holds its database role carries no valid capability and is refused. A
compensation carries none (the policy authorizes it when requested, unsigned); a downstream
names the compensating tools it accepts without one.
"""

from __future__ import annotations

import uuid
from typing import Any, Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

from shared.contracts.authorizations import Capability
from shared.contracts.tenants import TenantId
from shared.topology import EFFECT_RECEIPTS

EFFECT_REQUESTED = "EffectRequested"
EFFECT_LOOKUP_REQUESTED = "EffectLookupRequested"
EFFECT_RECEIPT_ISSUED = "EffectReceiptIssued"

MAX_FENCE = 2**63 - 1
"""Fences and attempt numbers are stored as PostgreSQL bigint and integer."""
MAX_ATTEMPT = 2**31 - 1

ReceiptStatus = Literal["applied", "rejected", "not_found", "stale"]


class _Contract(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class EffectRequested(_Contract):
    operation_key: str = Field(min_length=1, max_length=200, description="The idempotency key.")
    tool_name: str = Field(min_length=1, max_length=64)
    tool_version: str = Field(min_length=1, max_length=32)
    canonical_arguments: dict[str, Any] = Field(description="Money in integer minor units.")
    attempt: int = Field(ge=1, le=MAX_ATTEMPT)
    fence: int = Field(ge=0, le=MAX_FENCE,
                       description="The dispatcher's lease generation for this run.")
    tenant_id: TenantId = Field(description=(
        "The run's tenant. A run is named by tenant and run id (the envelope's): a fence is "
        "remembered per pair, since two tenants may each have a run of one id."))
    logical_call_id: uuid.UUID
    deadline_at: AwareDatetime = Field(description="Do not apply after this instant: the caller "
                                                   "has stopped waiting and will reconcile.")
    reply_topic: str = Field(default=EFFECT_RECEIPTS, min_length=1, max_length=249)
    capability: Capability | None = Field(
        default=None, description="The policy's signed capability for this intent; absent only "
        "on a compensation.")


class EffectLookupRequested(_Contract):
    operation_key: str = Field(min_length=1, max_length=200)
    tool_name: str = Field(min_length=1, max_length=64)
    attempt: int = Field(ge=1, le=MAX_ATTEMPT,
                         description="The dispatcher counts a lookup as an attempt.")
    fence: int = Field(ge=0, le=MAX_FENCE)
    tenant_id: TenantId = Field(description="The run's tenant, as in EffectRequested.")
    logical_call_id: uuid.UUID
    reply_topic: str = Field(default=EFFECT_RECEIPTS, min_length=1, max_length=249)


class EffectReceipt(_Contract):
    """``applied``: the effect exists (now or from an earlier request: ``replayed``).
    ``rejected``: confirmed that nothing was applied, with ``reason``.
    ``not_found``: answer to a lookup; this key was never settled here.
    ``stale``: the request's fence is below one already seen for its run; it was not considered."""

    operation_key: str
    logical_call_id: uuid.UUID = Field(description="Of the request answered.")
    attempt: int = Field(ge=1, description="Of the request answered.")
    status: ReceiptStatus
    replayed: bool = Field(default=False, description="True when this is the answer recorded for a "
                           "key already settled: the effect was NOT repeated.")
    result: dict[str, Any] | None = Field(default=None, description="The tool's result fields "
                                          "(untrusted until validated against its result schema).")
    reason: str | None = Field(default=None, max_length=200, description="Stable code for "
                               "rejected and stale.")
    receipt_id: uuid.UUID | None = Field(default=None, description="Minted when the key was "
                                         "settled; a replay returns the same id.")
    settled_by_attempt: int | None = Field(default=None, ge=1, description=(
        "For a replayed answer: the attempt whose request settled the key (the one that applied "
        "the effect), as opposed to ``attempt``, the request answered now."))
