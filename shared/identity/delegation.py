"""Who proposes in a signed proposal: the signer itself, or the principal a gateway proposes as.

An agent signs its proposals with its own key. A service that authenticates agents itself (the
MCP gateway) signs with its key and names the agent in the signature's ``agent`` claim, and the
person behind it, if it knows one, in ``person``. Those claims are trusted only from a signer
with role ``proposes-for-others``; each principal they name must be listed in the principals
file and may act for the tenant signed for. The proposer is then the one the record's calls must
name, and the signer and the person are recorded with every intent, so the history says who
signed for whom. Without the role, a signer naming anybody is refused: an agent cannot borrow
another's name by writing it into a claim.
"""

from __future__ import annotations

from dataclasses import dataclass

from shared.identity.principals import Principals
from shared.identity.signatures import (PROPOSES_FOR_OTHERS, IdentityReason, SignatureRefused,
                                        SignedBy)


@dataclass(frozen=True)
class Proposer:
    principal_id: str
    """Whom the record's calls must name."""
    signed_by: str | None = None
    """The gateway that signed for it; None when it signed itself."""
    person_id: str | None = None
    """The person the gateway says the agent acts for, if any."""


def proposer_of(signed: SignedBy, principals: Principals) -> Proposer:
    """The proposer ``signed`` establishes; raises ``SignatureRefused`` with the reason."""
    if signed.agent is None and signed.person is None:
        return Proposer(signed.principal_id)
    signer = principals.get(signed.principal_id)
    if signer is None or not signer.has_role(PROPOSES_FOR_OTHERS):
        raise SignatureRefused(IdentityReason.NOT_PROPOSER_FOR_OTHERS,
                               f"{signed.principal_id} may not propose for others")
    if signed.agent is None:
        raise SignatureRefused(IdentityReason.DELEGATE_UNKNOWN,
                               "the signature names a person but no agent to propose as")
    for named, unknown in ((signed.agent, IdentityReason.DELEGATE_UNKNOWN),
                           (signed.person, IdentityReason.PERSON_UNKNOWN)):
        if named is None:
            continue
        principal = principals.get(named)
        if principal is None:
            raise SignatureRefused(unknown, f"{signed.principal_id} proposes for {named!r}, "
                                   "who is not listed")
        if unknown is IdentityReason.PERSON_UNKNOWN and principal.kind != "person":
            raise SignatureRefused(unknown, f"{named} is a {principal.kind}, not a person")
        if not principal.acts_for(signed.tenant_id):
            raise SignatureRefused(IdentityReason.TENANT_NOT_ALLOWED,
                                   f"{named} may not act for tenant {signed.tenant_id!r}")
    return Proposer(signed.agent, signed.principal_id, signed.person)
