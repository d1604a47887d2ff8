"""Canonical arguments and the argumentsHash that binds an operation key to them.

Order matters: the tool's argument schema judges what the agent sent; the domain rules then
rewrite every spelling of one intent into one value (deepest paths first, so items are
canonical before the set that holds them is sorted); RFC 8785 fixes what is left (key
order, whitespace, number spelling); SHA-256 of those bytes is the hash.

Expects arguments parsed by ``json.loads`` that already passed intake's size limits (bytes,
nesting depth, string length): those limits come first in the validation order.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from shared.tools.jcs import jcs
from shared.tools.spec import ToolSpec
from shared.tools.tenancy import require_tenant


@dataclass(frozen=True)
class CanonicalArguments:
    """``value`` is parsed back from ``bytes_``: exactly what was hashed, sharing nothing with
    the proposal. Money in it is in integer minor units, which is what effect requests carry."""

    value: dict[str, Any]
    bytes_: bytes
    hash: str


def canonicalize(tool: ToolSpec, tenant_id: str, arguments: object) -> CanonicalArguments:
    require_tenant(tenant_id)
    tool.validate_arguments(arguments)
    value: Any = arguments
    for rule in sorted(tool.canonical, key=lambda rule: len(rule.segments), reverse=True):
        value = rule.apply(value, tenant_id)
    bytes_ = jcs(value)
    return CanonicalArguments(value=json.loads(bytes_), bytes_=bytes_,
                              hash=hashlib.sha256(bytes_).hexdigest())
