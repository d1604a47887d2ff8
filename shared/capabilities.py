"""Signing and checking capabilities: the policy signs, the dispatcher checks at dispatch.

HMAC-SHA256 with a secret both services share (``INTENTLEDGER_CAPABILITY_SECRET``; a
Kubernetes Secret in production). A capability read back from Kafka or the database is
trusted only if its signature matches its fields and it is bound to the very intent about to
be dispatched.
"""

from __future__ import annotations

import hashlib
import hmac
from datetime import datetime
from typing import Any

from shared.contracts.authorizations import Capability
from shared.contracts.intake import Intent
from shared.tools.jcs import jcs

_BOUND_FIELDS = ("run_id", "logical_call_id", "operation_key", "principal_id", "tenant_id",
                 "tool_name", "tool_version", "arguments_hash", "deadline_at", "run_max_attempts")


def sign(claims: dict[str, Any], secret: bytes) -> Capability:
    """``claims``: every Capability field but ``signature``. They are signed in the form the
    capability serializes to, so the bytes checked later are the bytes signed now."""
    unsigned = Capability.model_validate(claims | {"signature": "0" * 64})
    normalized = unsigned.model_dump(mode="json", exclude={"signature"})
    return unsigned.model_copy(update={"signature": _mac(normalized, secret)})


def refusal(capability: Capability, intent: Intent, secret: bytes, now: datetime) -> str | None:
    """Why this capability does not authorize this intent now, or None when it does: a valid
    signature, every identifying field of the intent (its deadline and attempt budget too),
    the arguments themselves against the signed hash, and nothing expired."""
    claims = capability.model_dump(mode="json", exclude={"signature"})
    if not hmac.compare_digest(capability.signature, _mac(claims, secret)):
        return "capability_signature_invalid"
    for field in _BOUND_FIELDS:
        if str(getattr(capability, field)) != str(getattr(intent, field)):
            return "capability_not_for_this_intent"
    # The hash is signed; the arguments travel beside it unsigned. What will be sent must be
    # what was hashed (canonical arguments are their own RFC 8785 form).
    if hashlib.sha256(jcs(intent.canonical_arguments)).hexdigest() != capability.arguments_hash:
        return "capability_not_for_this_intent"
    if capability.expires_at <= now:
        return "capability_expired"
    if any(approval.expires_at <= now for approval in capability.approvals):
        return "approval_expired"
    return None


def _mac(claims: dict[str, Any], secret: bytes) -> str:
    return hmac.new(secret, jcs(claims), hashlib.sha256).hexdigest()
