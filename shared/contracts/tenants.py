"""What a tenant id may be: a DNS label (lowercase letters, digits and ``-``, at most 63).

A tenant's answers travel on a topic of its own, ``agent.results.<tenant>``, and its Kafka user
is a Kubernetes resource named after it; so a tenant id must be a legal, unambiguous part of
both names. No ``.``: one would nest a tenant's topic under another's name (``acme.eu`` under
``acme``); no ``_``: Kafka's metrics turn ``.`` into ``_``, so ``a_b`` and ``a.b`` would
collide; no upper case: ``Acme`` and ``acme`` would be two topics that people read as one.
"""

from __future__ import annotations

from typing import Annotated

from intentledger_client.topics import TENANT_ID_PATTERN, is_tenant_id
from pydantic import StringConstraints

__all__ = ["TENANT_ID_MAX_CHARS", "TENANT_ID_PATTERN", "TenantId", "is_tenant_id"]
TENANT_ID_MAX_CHARS = 63
TenantId = Annotated[str, StringConstraints(pattern=f"^{TENANT_ID_PATTERN}$")]
"""The pattern is the agent client's (it names the tenant's results topic), anchored."""
