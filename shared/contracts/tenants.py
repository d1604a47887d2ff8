"""What a tenant id may be: a DNS label (lowercase letters, digits and ``-``, at most 63).

A tenant's answers travel on a topic of its own, ``agent.results.<tenant>``, and its Kafka user
is a Kubernetes resource named after it; so a tenant id must be a legal, unambiguous part of
both names. No ``.``: one would nest a tenant's topic under another's name (``acme.eu`` under
``acme``); no ``_``: Kafka's metrics turn ``.`` into ``_``, so ``a_b`` and ``a.b`` would
collide; no upper case: ``Acme`` and ``acme`` would be two topics that people read as one.
"""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import StringConstraints

TENANT_ID_MAX_CHARS = 63
TENANT_ID_PATTERN = r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?"
"""Unanchored, for composing topic patterns; ``TenantId`` anchors it."""
TenantId = Annotated[str, StringConstraints(pattern=f"^{TENANT_ID_PATTERN}$")]
_TENANT_ID = re.compile(TENANT_ID_PATTERN)


def is_tenant_id(value: object) -> bool:
    return isinstance(value, str) and _TENANT_ID.fullmatch(value) is not None
