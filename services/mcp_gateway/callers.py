"""Who calls: the principal (and tenant, and person) an authenticated bearer token stands for.

A token names a principal of the principals file, never a key: the gateway signs with its own
key and names the caller in the signature's ``agent`` claim (``shared.identity.delegation``), so
the caller needs no key here. The tenant is the token's ``tenant`` claim, else the principal's
only tenant; a principal that acts for several tenants or for a pattern must have its token name
one. Where the deployment's authorization server names its clients by their principals (opt in:
``agents_from_client_ids``; never with open dynamic client registration, where anyone would
pick the name), a JWT whose ``client_id`` (or ``azp``) is a listed agent, issued to a person
(``sub``), proposes as that agent on the person's behalf: both are recorded with each intent.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mcp.server.auth.provider import AccessToken

from shared.identity.principals import Principals


@dataclass(frozen=True)
class Caller:
    principal_id: str
    """The agent the gateway proposes as: the calls' principal."""
    tenant_id: str
    person_id: str | None = None
    """The person behind it, when the token was issued to one."""


class CallerToken(AccessToken):
    """A verified token and the caller it stands for (what ``get_access_token`` returns)."""

    caller: Caller


def caller_of(subject: str, claims: dict[str, Any], principals: Principals, *,
              agents_from_client_ids: bool = False) -> Caller | None:
    """The caller ``subject`` (and the token's claims) names; None when the principals file
    does not list it or it may not act for the tenant named."""
    principal = principals.get(subject)
    if principal is None:
        return None
    person_id = None
    client = principals.get(str(claims.get("client_id") or claims.get("azp") or ""))
    if (agents_from_client_ids and principal.kind == "person" and client is not None
            and client.kind != "person"):
        principal, person_id = client, principal.id
    tenant = claims.get("tenant")
    if tenant is None:
        literal = [t for t in principal.tenants if not any(c in t for c in "*?[")]
        if len(principal.tenants) != 1 or len(literal) != 1:
            return None
        tenant = literal[0]
    if not isinstance(tenant, str) or not principal.acts_for(tenant):
        return None
    if person_id is not None and not principals.get(person_id).acts_for(tenant):
        return None
    return Caller(principal.id, tenant, person_id)
