"""API keys map to one tenant, or to every tenant for an operator key; anything else is refused."""

from services.query.access import OPERATOR_ROLE, TENANT_ROLE, access_for

KEYS = {"key-acme": "acme", "key-ops": "*"}


def test_a_tenant_key_grants_that_tenant_under_the_tenant_role():
    access = access_for("key-acme", KEYS)
    assert access.tenant == "acme" and not access.operator and access.role == TENANT_ROLE


def test_an_operator_key_grants_every_tenant_under_the_operator_role():
    access = access_for("key-ops", KEYS)
    assert access.operator and access.role == OPERATOR_ROLE


def test_a_missing_empty_or_unknown_key_grants_nothing():
    assert access_for(None, KEYS) is None
    assert access_for("", KEYS) is None
    assert access_for("key-acm", KEYS) is None
    assert access_for("key-acme", {}) is None
