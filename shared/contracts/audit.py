"""The audit API a downstream serves so the ledger can check its settled calls against what the
downstream really holds (``intentledger audit``; the dispatcher's scheduled audit).

A tool declares it in the registry as ``audit_url``; the downstream answers, from its own
records of effects (not from its idempotency keys, which it may forget):

- ``GET {audit_url}/effects?tool_name=T&since=…&until=…[&after=CURSOR][&limit=N]``: the effects
  of tool T it applied in ``[since, until)``, oldest first, ``limit`` at a time (at most
  ``MAX_LISTED``); ``next`` is the ``after`` of the following page, null on the last.
- ``POST {audit_url}/effects/by-key`` with an ``EffectsByKey``: the effects it holds under any
  of these operation keys, whenever applied.

Both answer an ``EffectListing``; a malformed request gets 400 ``{"error": …}``. The reference
wallet implements it (``downstreams/wallet/audit_api.py``). It reads no fence and changes
nothing: auditing never moves a call, and nothing it finds is repaired by itself.
"""

from __future__ import annotations

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

MAX_LISTED = 1000
"""The most effects one page, and the most keys one by-key question, may hold."""


class _Contract(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class AuditedEffect(_Contract):
    operation_key: str
    tool_name: str
    effect_id: str = Field(description="The downstream's own id of the effect (a debit id).")
    tenant_id: str | None = None
    applied_at: AwareDatetime


class EffectListing(_Contract):
    effects: list[AuditedEffect] = Field(max_length=MAX_LISTED)
    next: str | None = Field(default=None, description="The cursor of the next page, if any.")


class EffectsByKey(_Contract):
    tool_name: str
    operation_keys: list[str] = Field(min_length=1, max_length=MAX_LISTED)
