"""Signing and checking capabilities: the policy signs, the dispatcher and every downstream check.

A capability's ``signature`` is a compact JWS with a detached payload (RFC 7515 appendix F)
over the RFC 8785 form of every other field, signed with the policy's Ed25519 key. Its
protected header names the key (``kid``) and the use (``typ``
``intentledger-capability+jws``). Only the policy holds the private key; everyone else
verifies with a set of public keys by ``kid`` (``shared.identity.capability_keys``), so that a
holder of another service's credentials can forge nothing, and several keys can be valid at
once while the policy's key is rotated. A capability signed by a kid outside the set (rotated
out) is refused.

The signature is a sealed document's (``shared.identity.sealed``); nothing here computes one.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from joserfc.jwk import OKPKey

from shared.contracts.authorizations import Capability
from shared.contracts.intake import Intent
from shared.identity import sealed
from shared.tools.jcs import jcs

TYP = "intentledger-capability+jws"
_BOUND_FIELDS = ("run_id", "logical_call_id", "operation_key", "principal_id", "tenant_id",
                 "tool_name", "tool_version", "arguments_hash", "deadline_at", "run_max_attempts")
PublicKeys = Mapping[str, OKPKey]
"""The keys a capability may be signed with, by ``kid``."""


def sign(claims: dict[str, Any], key: OKPKey) -> Capability:
    """``claims``: every Capability field but ``signature``. They are signed in the form the
    capability serializes to, so the bytes checked later are the bytes signed now."""
    if not isinstance(key, OKPKey):
        raise ValueError("capabilities are signed with an Ed25519 (OKP) key")
    unsigned = Capability.model_validate(claims | {"signature": sealed.UNSIGNED})
    return sealed.sealed_copy(unsigned, key, TYP)


def signature_refusal(capability: Capability, keys: PublicKeys) -> str | None:
    """Why this capability's signature does not hold, or None: signed by a key of ``keys``
    over these very fields."""
    try:
        sealed.signer_of(sealed.fields_of(capability), capability.signature, TYP, keys.get)
    except sealed.Unsealed as refused:
        return ("capability_key_unknown" if refused.reason == "key_unknown"
                else "capability_signature_invalid")
    return None


def refusal(capability: Capability, intent: Intent, keys: PublicKeys, now: datetime) -> str | None:
    """Why this capability does not authorize this intent now, or None when it does: a valid
    signature, every identifying field of the intent (its deadline and attempt budget too),
    the arguments themselves against the signed hash, and nothing expired."""
    if reason := signature_refusal(capability, keys):
        return reason
    for field in _BOUND_FIELDS:
        if str(getattr(capability, field)) != str(getattr(intent, field)):
            return "capability_not_for_this_intent"
    if arguments_hash(intent.canonical_arguments) != capability.arguments_hash:
        return "capability_not_for_this_intent"
    return expiry_refusal(capability, now)


def expiry_refusal(capability: Capability, now: datetime) -> str | None:
    if capability.expires_at <= now:
        return "capability_expired"
    if any(approval.expires_at <= now for approval in capability.approvals):
        return "approval_expired"
    return None


def arguments_hash(canonical_arguments: dict[str, Any]) -> str:
    """The hash a capability signs: canonical arguments are their own RFC 8785 form, so what
    will be sent must be what was hashed."""
    return hashlib.sha256(jcs(canonical_arguments)).hexdigest()
