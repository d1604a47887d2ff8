"""Who acts in an approval or a resolution: the signer, or the person a console signs for."""

from __future__ import annotations

import pytest

from shared.identity.acting import APPROVER, OPERATOR, acting_principal
from shared.identity.principals import Principals
from shared.identity.signatures import (APPROVAL, RESOLUTION, IdentityReason, SignatureRefused,
                                        generate_signing_key, sign)

KEYS = {name: generate_signing_key(f"{name}-1") for name in (
    "finance:a", "finance:b", "operator:dana", "console", "svc:impostor")}
ROLES = {"finance:a": ["approver"], "finance:b": ["approver"], "operator:dana": ["operator"],
         "console": ["publishes-for-people"], "svc:impostor": []}
PRINCIPALS = Principals.model_validate({"principals": [
    {"id": name, "kind": "service" if name in ("console", "svc:impostor") else "person",
     "tenants": ["*"] if name != "finance:b" else ["acme"], "roles": ROLES[name],
     "keys": [{"kid": key.kid, "jwk": key.as_dict(private=False)}]}
    for name, key in KEYS.items()]})
VALUE = b'{"event_type": "ApprovalGranted"}'


def acting(signer: str, *, named: str, role: str = APPROVER, use: str = APPROVAL,
           signed_use: str = APPROVAL, tenant: str = "acme", call_tenant: str = "acme",
           person: str | None = None, headers: int = 1) -> str:
    token = sign(VALUE, KEYS[signer], principal_id=signer, tenant_id=tenant, use=signed_use,
                 person=person).encode()
    return acting_principal(VALUE, [token] * headers, PRINCIPALS, use=use, tenant_id=call_tenant,
                            named=named, role=role).id


def refusal(signer: str, **options) -> IdentityReason:
    with pytest.raises(SignatureRefused) as refused:
        acting(signer, **options)
    return refused.value.code


def test_the_signer_acts_when_it_is_the_one_named_with_the_role():
    assert acting("finance:a", named="finance:a") == "finance:a"
    assert acting("operator:dana", named="operator:dana", role=OPERATOR, use=RESOLUTION,
                  signed_use=RESOLUTION) == "operator:dana"


def test_a_console_acts_for_a_listed_person_with_the_role():
    assert acting("console", named="finance:a", person="finance:a") == "finance:a"


@pytest.mark.parametrize(("signer", "options", "code"), [
    ("finance:a", {"named": "finance:b"}, IdentityReason.SIGNATURE_PRINCIPAL_MISMATCH),
    ("finance:a", {"named": "finance:a", "role": OPERATOR}, IdentityReason.PRINCIPAL_LACKS_ROLE),
    ("finance:a", {"named": "finance:a", "tenant": "globex"}, IdentityReason.SIGNATURE_TENANT_MISMATCH),
    ("finance:a", {"named": "finance:a", "signed_use": RESOLUTION},
     IdentityReason.SIGNATURE_FOR_ANOTHER_USE),
    ("finance:a", {"named": "finance:a", "headers": 0}, IdentityReason.SIGNATURE_MISSING),
    ("finance:a", {"named": "finance:a", "headers": 2}, IdentityReason.SIGNATURE_MALFORMED),
    ("svc:impostor", {"named": "finance:a", "person": "finance:a"},
     IdentityReason.NOT_PUBLISHER_FOR_PEOPLE),
    ("console", {"named": "finance:z", "person": "finance:z"}, IdentityReason.PERSON_UNKNOWN),
    ("console", {"named": "finance:b", "person": "finance:b", "tenant": "globex",
                 "call_tenant": "globex"}, IdentityReason.TENANT_NOT_ALLOWED),
    ("console", {"named": "finance:a", "person": "operator:dana"},
     IdentityReason.SIGNATURE_PRINCIPAL_MISMATCH),
    ("console", {"named": "console"}, IdentityReason.PRINCIPAL_LACKS_ROLE),
])
def test_anyone_else_is_refused_with_a_stable_reason(signer, options, code):
    assert refusal(signer, **options) == code
