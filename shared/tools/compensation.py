"""The one compensation of a call, derived the same way by whoever proposes it (the
dispatcher) and whoever authorizes it (the policy).

The registry names each compensatable tool's compensating tool and where its arguments come
from: the original call's canonical arguments (``arguments.<path>``) or its validated result
(``result.<path>``). The compensation's call id is derived from the original's (a crash
between deciding and recording cannot mint a second one) and its operation key from the
compensating tool's key scheme with the original's key as the caller's (a repeated request
for it is the same intent).
"""

from __future__ import annotations

import hashlib
import uuid
from datetime import datetime
from typing import Any

from shared.contracts.intake import Intent
from shared.tools import paths
from shared.tools.canonical import CanonicalArguments
from shared.tools.jcs import jcs
from shared.tools.keys import operation_key
from shared.tools.rejections import Rejection
from shared.tools.spec import ToolSpec

_NAMESPACE = uuid.UUID("4f1c53c2-5d55-4a39-9d5e-0c3b1f0a7e21")


class ArgumentsMissing(Exception):
    """The original call lacks what its compensation's arguments are taken from."""


def compensation_intent(original: Intent, result: dict[str, Any] | None, compensating: ToolSpec,
                        sources: dict[str, str], deadline_at: datetime) -> Intent:
    arguments = {}
    for target, source in sources.items():
        root, _, path = source.partition(".")
        holder = original.canonical_arguments if root == "arguments" else result or {}
        value = paths.value_at(holder, paths.parse_path(path))
        if value is paths.MISSING or value is None:
            raise ArgumentsMissing(f"{source} is missing, so {target} cannot be given")
        arguments[target] = value
    canonical = _canonical(arguments)
    try:
        key = _key(compensating, original, canonical)
    except Rejection as rejection:
        raise ArgumentsMissing(rejection.message) from None
    return Intent(
        run_id=original.run_id, provider=original.provider,
        provider_call_id=f"compensation:{original.provider_call_id}",
        logical_call_id=compensation_call_id(original.logical_call_id),
        operation_key=key, tool_name=compensating.name, tool_version=compensating.version,
        arguments_hash=canonical.hash, canonical_arguments=arguments,
        principal_id=original.principal_id, tenant_id=original.tenant_id, deadline_at=deadline_at,
        compensates=original.logical_call_id)


def compensation_mismatch(original: Intent, original_tool: ToolSpec, compensating: ToolSpec,
                          proposed: Intent) -> str | None:
    """Why ``proposed`` is not the compensation the registry derives for ``original``, or None.
    What comes from the original's result cannot be checked here (only the proposer saw the
    result); everything else is: the tool, the run, the parties, every argument taken from the
    original's arguments, the call id, the key and the hash."""
    ref = original_tool.compensating_tool
    if ref is None or (ref.name, ref.version) != (compensating.name, compensating.version):
        return (f"{original.tool_name} v{original.tool_version} is not compensated by "
                f"{compensating.name} v{compensating.version}")
    if proposed.compensates != original.logical_call_id:
        return "it names another call as the one it compensates"
    if proposed.logical_call_id != compensation_call_id(original.logical_call_id):
        return "its call id is not the one derived from the original's"
    parties = ("run_id", "principal_id", "tenant_id")
    if any(getattr(proposed, field) != getattr(original, field) for field in parties):
        return "another run, principal or tenant than the original's"
    if (proposed.tool_name, proposed.tool_version) != (compensating.name, compensating.version):
        return "another tool than the registry's compensating tool"
    arguments = proposed.canonical_arguments
    if set(arguments) != set(original_tool.compensation_arguments):
        return "other arguments than the registry's compensation_arguments"
    for target, source in original_tool.compensation_arguments.items():
        root, _, path = source.partition(".")
        if root == "arguments" and arguments[target] != paths.value_at(
                original.canonical_arguments, paths.parse_path(path)):
            return f"{target} is not the original's {source}"
    canonical = _canonical(arguments)
    if canonical.hash != proposed.arguments_hash:
        return "its arguments hash is not its arguments'"
    try:
        key = _key(compensating, original, canonical)
    except Rejection as rejection:
        return rejection.message
    if key != proposed.operation_key:
        return "its operation key is not the one derived from the original's"
    return None


def compensation_call_id(original: uuid.UUID) -> uuid.UUID:
    return uuid.uuid5(_NAMESPACE, str(original))


def _canonical(arguments: dict[str, Any]) -> CanonicalArguments:
    canonical_bytes = jcs(arguments)
    return CanonicalArguments(arguments, canonical_bytes, hashlib.sha256(canonical_bytes).hexdigest())


def _key(compensating: ToolSpec, original: Intent, canonical: CanonicalArguments) -> str:
    return operation_key(compensating, original.tenant_id, original.run_id, canonical,
                         caller_key=f"compensates:{original.operation_key}")
