"""Tenant ids and tenant-scoped resource ids: the isolation boundary inside every key and hash.

A tenant id never contains ``/`` or ``:``, so ``tenant/<tenant>/<id>`` and the
``<tenant>:…`` prefix of operation keys cannot be forged by a tenant whose id contains the
separator (tenant ``a/b`` with id ``c`` would otherwise equal tenant ``a`` with id ``b/c``).
"""

from __future__ import annotations

import re

from shared.tools.rejections import Rejection, RejectionCode

TENANT_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"
"""Public: the proposal schema's ``tenantId`` uses this same pattern."""

_TENANT_ID = re.compile(TENANT_ID_PATTERN)
_PREFIX = "tenant/"


def require_tenant(tenant_id: object) -> str:
    if not isinstance(tenant_id, str) or not _TENANT_ID.fullmatch(tenant_id):
        raise Rejection(RejectionCode.TENANT_INVALID,
                        f"tenant id must match {TENANT_ID_PATTERN}")
    return tenant_id


def scope_resource(raw: object, tenant_id: str, where: str) -> str:
    """``"w-1"`` and ``"tenant/<tenant>/w-1"`` name the same resource; another tenant's is refused."""
    if not isinstance(raw, str):
        raise Rejection(RejectionCode.ARGUMENTS_INVALID, f"{where}: a resource id must be a string")
    local = raw
    if raw.startswith(_PREFIX):
        owner, _, local = raw[len(_PREFIX):].partition("/")
        if owner != tenant_id:
            raise Rejection(RejectionCode.TENANT_MISMATCH,
                            f"{where}: the resource belongs to another tenant than {tenant_id!r}")
    if not local or any(ch.isspace() or not ch.isprintable() for ch in local):
        raise Rejection(RejectionCode.RESOURCE_ID_INVALID,
                        f"{where}: a resource id must be non-empty, printable and without spaces")
    return tenant_resource(tenant_id, local)


def tenant_resource(tenant_id: str, local: str) -> str:
    return f"{_PREFIX}{tenant_id}/{local}"


def tenant_of(resource_id: str) -> str:
    """The tenant of a canonical ``tenant/<tenant>/<local id>`` (what downstreams receive);
    ValueError for anything else."""
    prefix, _, rest = resource_id.partition(_PREFIX)
    tenant, sep, local = rest.partition("/")
    if prefix or not tenant or not sep or not local:
        raise ValueError(f"resource id {resource_id!r} is not tenant/<tenant>/<id>")
    return tenant
