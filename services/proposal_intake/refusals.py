"""Where a message refused whole goes: whose results topic answers it, and whose history (if
anyone's) records it. Two questions with two answers on purpose: the agent that wrote the body
reads the topic of the tenant it names, while the history takes only a tenant the sender
proved, since an event under a tenant enters that tenant's run of the named id
(docs/design.md, "Runs are named by tenant and run id")."""

from __future__ import annotations

from collections.abc import Collection

from services.proposal_intake.limits import ReplyAddress
from shared.contracts.tenants import is_tenant_id
from shared.identity.signatures import SignedBy


def reply_tenant(signed: SignedBy | None, address: ReplyAddress) -> str | None:
    """Whose results topic a refused message is answered on: the tenant its body names (its
    agent reads there), else the one a verified signature names; None, to dead-letter it,
    when neither is a valid tenant id (it would name no topic)."""
    if address.tenant_id is not None:
        return address.tenant_id
    return signed.tenant_id if signed is not None and is_tenant_id(signed.tenant_id) else None


def recorded_under(signed: SignedBy | None, address: ReplyAddress,
                   unsigned_tenants: Collection[str]) -> str | None:
    """The tenant whose history a refused message enters, or None (it enters none): the tenant
    a verified signature names, else, unsigned, the body's tenant if it takes unsigned
    proposals. Never the body's claim alone."""
    if signed is not None:
        return signed.tenant_id if is_tenant_id(signed.tenant_id) else None
    if address.tenant_id is not None and address.tenant_id in unsigned_tenants:
        return address.tenant_id
    return None
