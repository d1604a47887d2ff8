"""The downstream SDK helper that checks the policy's capability on each effect request.

The dispatcher checks a capability at dispatch; a downstream that checks it again trusts no
one between the policy and itself. Whoever can write a row into a service's outbox (its
database role) can make the relay publish anything on ``effects.<tool>``, but cannot sign as
the policy: only the policy holds the private key, and this check needs only the public ones.

Call it after the key's recorded answer is looked up and before anything is applied: a
request for a key already settled is answered with the recorded answer (refusing it would
deny an effect that exists), and a refused request leaves the key unsettled, answered
``rejected`` with one of ``CapabilityReason`` (nothing applied, so nothing acknowledged is
lost: a request that does carry a valid capability may still apply under the key).
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import UTC, datetime
from enum import StrEnum

from shared.capabilities import PublicKeys, arguments_hash, expiry_refusal, signature_refusal
from shared.contracts.effect_requests import EffectRequested


class CapabilityReason(StrEnum):
    """Why a downstream refused an effect request's capability; stable, callers branch on them."""

    CAPABILITY_MISSING = "capability_missing"
    CAPABILITY_SIGNATURE_INVALID = "capability_signature_invalid"
    CAPABILITY_KEY_UNKNOWN = "capability_key_unknown"
    CAPABILITY_NOT_FOR_THIS_REQUEST = "capability_not_for_this_request"
    CAPABILITY_TENANT_NOT_SERVED = "capability_tenant_not_served"
    CAPABILITY_EXPIRED = "capability_expired"


class CapabilityCheck:
    """``tenants``: the tenants this downstream serves (empty: any). Every request needs a
    capability, a compensation's too (the policy authorizes compensations like any call)."""

    def __init__(self, keys: PublicKeys, *, tenants: Collection[str] = ()) -> None:
        self._keys = keys
        self._tenants = frozenset(tenants)

    def refusal(self, request: EffectRequested,
                now: datetime | None = None) -> CapabilityReason | None:
        """Why ``request`` is not authorized by its capability, or None when it is: signed by
        a key of the set, for this very key, call, tool and arguments, for a tenant served
        here, and not expired."""
        capability = request.capability
        if capability is None:
            return CapabilityReason.CAPABILITY_MISSING
        if reason := signature_refusal(capability, self._keys):
            return CapabilityReason(reason)
        bound = ((capability.operation_key, request.operation_key),
                 (capability.logical_call_id, request.logical_call_id),
                 (capability.tool_name, request.tool_name),
                 (capability.tool_version, request.tool_version),
                 (capability.arguments_hash, arguments_hash(request.canonical_arguments)))
        if any(signed != asked for signed, asked in bound):
            return CapabilityReason.CAPABILITY_NOT_FOR_THIS_REQUEST
        if self._tenants and capability.tenant_id not in self._tenants:
            return CapabilityReason.CAPABILITY_TENANT_NOT_SERVED
        if expiry_refusal(capability, now or datetime.now(UTC)):
            return CapabilityReason.CAPABILITY_EXPIRED
        return None
