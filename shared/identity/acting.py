"""Who acts in a signed approval or resolution: the one a person's decision counts for.

A person signs with their own key; or a service that authenticates people itself (the
console) signs with its key and names the person in the signature's ``person`` claim. That
claim is trusted only from a principal with role ``publishes-for-people``, and the person it
names must be listed in the principals file like any other. Whoever acts must then be the one
the record names (its ``approver_id`` or ``operator_id``), may act for the call's tenant, and
holds the role the record needs. A record's free-text ids are never taken on trust: one
person signing twice under two names is one person.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from shared.identity.principals import Principal, Principals
from shared.identity.records import SignedEnvelope
from shared.identity.signatures import (PUBLISHES_FOR_PEOPLE, IdentityReason, SignatureRefused,
                                        verify_record)

APPROVER, OPERATOR, COMPENSATOR = "approver", "operator", "compensator"
"""The roles an approval, a resolution and a compensation proposal need."""


def acting_principal(value: bytes, signatures: Sequence[bytes], principals: Principals, *,
                     use: str, tenant_id: str, named: str, role: str,
                     now: datetime | None = None) -> Principal:
    """The principal ``named`` once the record's one signature proves it acts, for
    ``tenant_id``, with ``role``; raises ``SignatureRefused`` with the reason otherwise."""
    signed = verify_record(value, signatures, principals, use=use, now=now)
    if signed.tenant_id != tenant_id:
        raise SignatureRefused(IdentityReason.SIGNATURE_TENANT_MISMATCH,
                               f"signed for tenant {signed.tenant_id!r}, the call is {tenant_id!r}")
    actor = principals.get(signed.principal_id)
    assert actor is not None  # verify found its key in these very principals
    if signed.person is not None:
        if not actor.has_role(PUBLISHES_FOR_PEOPLE):
            raise SignatureRefused(IdentityReason.NOT_PUBLISHER_FOR_PEOPLE,
                                   f"{actor.id} may not publish for {signed.person!r}")
        person = principals.get(signed.person)
        if person is None:
            raise SignatureRefused(IdentityReason.PERSON_UNKNOWN,
                                   f"{actor.id} publishes for {signed.person!r}, who is not listed")
        if not person.acts_for(tenant_id):
            raise SignatureRefused(IdentityReason.TENANT_NOT_ALLOWED,
                                   f"{person.id} may not act for tenant {tenant_id!r}")
        actor = person
    if actor.id != named:
        raise SignatureRefused(IdentityReason.SIGNATURE_PRINCIPAL_MISMATCH,
                               f"the record names {named!r}, {actor.id} acts")
    if not actor.has_role(role):
        raise SignatureRefused(IdentityReason.PRINCIPAL_LACKS_ROLE,
                               f"{actor.id} does not have role {role!r}")
    return actor


def refusal(envelope: SignedEnvelope, principals: Principals, *, use: str, tenant_id: str,
            named: str, role: str, now: datetime | None = None) -> SignatureRefused | None:
    """Why the signed record does not prove ``named`` acts (``acting_principal``), or None when
    it does: for a consumer that records a refusal rather than raising one."""
    try:
        acting_principal(envelope.record_value, envelope.signatures, principals, use=use,
                         tenant_id=tenant_id, named=named, role=role, now=now)
    except SignatureRefused as refused:
        return refused
    return None
