"""Compensation is a new effect, not a rollback (docs/design.md §5.8).

The registry names each compensatable tool's compensating tool and where its arguments come
from (the original call's canonical arguments or its validated result). The compensation gets
an intent of its own: its own operation key (from the compensating tool's key scheme, so a
repeated request for it is the same intent), a deterministic intent id (a crash between
deciding and recording cannot mint a second one), its own deadline, and then the same life as
any call: authority, attempts, reconciliation, audit.
"""

from __future__ import annotations

import hashlib
import uuid
from datetime import datetime

from services.dispatcher.repository import Call
from shared.contracts.dispatch import DispatchReason
from shared.contracts.intake import Intent
from shared.tools import CanonicalArguments, Rejection, ToolSpec, operation_key
from shared.tools import paths
from shared.tools.jcs import jcs

_NAMESPACE = uuid.UUID("4f1c53c2-5d55-4a39-9d5e-0c3b1f0a7e21")


class NoCompensation(Exception):
    def __init__(self, reason: DispatchReason, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason
        self.detail = detail


def compensation_intent(original: Call, compensating: ToolSpec, sources: dict[str, str],
                        deadline_at: datetime) -> Intent:
    arguments = {}
    for target, source in sources.items():
        root, _, path = source.partition(".")
        holder = original.canonical_arguments if root == "arguments" else original.result or {}
        value = paths.value_at(holder, paths.parse_path(path))
        if value is paths.MISSING or value is None:
            raise NoCompensation(DispatchReason.COMPENSATION_ARGUMENTS_MISSING,
                                 f"{source} is missing, so {target} cannot be given")
        arguments[target] = value
    try:
        canonical_bytes = jcs(arguments)
        canonical = CanonicalArguments(arguments, canonical_bytes,
                                       hashlib.sha256(canonical_bytes).hexdigest())
        key = operation_key(compensating, original.tenant_id, original.run_id, canonical,
                            caller_key=f"compensates:{original.operation_key}")
    except Rejection as rejection:
        raise NoCompensation(DispatchReason.COMPENSATION_ARGUMENTS_MISSING,
                             rejection.message) from None
    provider_call_id = original.intent.get("provider_call_id", str(original.logical_call_id))
    return Intent(
        run_id=original.run_id, provider=original.intent.get("provider", "generic"),
        provider_call_id=f"compensation:{provider_call_id}",
        logical_call_id=uuid.uuid5(_NAMESPACE, str(original.logical_call_id)),
        operation_key=key, tool_name=compensating.name, tool_version=compensating.version,
        arguments_hash=canonical.hash, canonical_arguments=arguments,
        principal_id=original.principal_id, tenant_id=original.tenant_id, deadline_at=deadline_at)
