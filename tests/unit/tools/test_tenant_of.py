"""Downstreams read the tenant back from a canonical resource id (tenant/<tenant>/<id>)."""

from __future__ import annotations

import pytest

from shared.tools.tenancy import tenant_of, tenant_resource


def test_the_tenant_is_read_from_a_canonical_resource_id():
    assert tenant_of("tenant/acme/w-1") == "acme"
    assert tenant_of(tenant_resource("globex", "o-1")) == "globex"


@pytest.mark.parametrize("bad", ["w-1", "acme/o-1", "tenant/acme", "tenant//o-1", "tenant/acme/",
                                 "x/tenant/a/b", "x/tenant/acme/w-1"])
def test_a_resource_id_outside_a_tenant_is_refused(bad):
    with pytest.raises(ValueError):
        tenant_of(bad)
