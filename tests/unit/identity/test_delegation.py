"""Who proposes: the signer, or the agent a gateway (role proposes-for-others) signs for."""

from __future__ import annotations

import pytest

from shared.identity.delegation import Proposer, proposer_of
from shared.identity.principals import Principals
from shared.identity.signatures import (IdentityReason, SignatureRefused, generate_signing_key,
                                        sign, verify)

KINDS = {"mcp-gateway": ("service", ["*"], ["proposes-for-others"]),
         "console": ("service", ["*"], ["publishes-for-people"]),
         "agent-7": ("agent", ["acme"], []), "globex-agent": ("agent", ["globex"], []),
         "finance:a": ("person", ["acme"], []), "mallory": ("agent", ["*"], [])}
KEYS = {name: generate_signing_key(f"{name}-1") for name in KINDS}
PRINCIPALS = Principals.model_validate({"principals": [
    {"id": name, "kind": kind, "tenants": tenants, "roles": roles,
     "keys": [{"kid": KEYS[name].kid, "jwk": KEYS[name].as_dict(private=False)}]}
    for name, (kind, tenants, roles) in KINDS.items()]})
VALUE = b'{"format": "generic"}'


def proposer(signer: str, tenant: str = "acme", **claims) -> Proposer:
    token = sign(VALUE, KEYS[signer], principal_id=signer, tenant_id=tenant, **claims)
    return proposer_of(verify(VALUE, token, PRINCIPALS), PRINCIPALS)


def refusal(signer: str, **options) -> IdentityReason:
    with pytest.raises(SignatureRefused) as refused:
        proposer(signer, **options)
    return refused.value.code


def test_a_signer_naming_nobody_proposes_as_itself():
    assert proposer("agent-7") == Proposer("agent-7")


def test_a_gateway_proposes_as_the_agent_it_names_for_the_person_it_names():
    assert proposer("mcp-gateway", agent="agent-7", person="finance:a") == Proposer(
        "agent-7", "mcp-gateway", "finance:a")
    assert proposer("mcp-gateway", agent="agent-7") == Proposer("agent-7", "mcp-gateway")


@pytest.mark.parametrize(("signer", "options", "code"), [
    ("mallory", {"agent": "agent-7"}, IdentityReason.NOT_PROPOSER_FOR_OTHERS),
    ("console", {"agent": "agent-7"}, IdentityReason.NOT_PROPOSER_FOR_OTHERS),
    ("mallory", {"person": "finance:a"}, IdentityReason.NOT_PROPOSER_FOR_OTHERS),
    ("mcp-gateway", {"agent": "ghost"}, IdentityReason.DELEGATE_UNKNOWN),
    ("mcp-gateway", {"person": "finance:a"}, IdentityReason.DELEGATE_UNKNOWN),
    ("mcp-gateway", {"agent": "globex-agent"}, IdentityReason.TENANT_NOT_ALLOWED),
    ("mcp-gateway", {"agent": "agent-7", "person": "nobody"}, IdentityReason.PERSON_UNKNOWN),
    ("mcp-gateway", {"agent": "agent-7", "person": "mallory"}, IdentityReason.PERSON_UNKNOWN),
    ("mcp-gateway", {"agent": "agent-7", "tenant": "globex"}, IdentityReason.TENANT_NOT_ALLOWED),
])
def test_delegation_is_refused_to_signers_without_the_role_and_for_names_not_of_the_tenant(
        signer, options, code):
    assert refusal(signer, **options) == code
