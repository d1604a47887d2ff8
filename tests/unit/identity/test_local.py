"""Local identities: what the demo, the fault protocols and the tests sign with."""

import stat

from shared.identity.local import Identity, LocalIdentities
from shared.identity.principals import load_principals
from shared.identity.signatures import sign, verify


def test_a_key_is_made_once_kept_private_and_verifies_against_the_written_file(tmp_path):
    local = LocalIdentities(tmp_path)
    local.ensure([Identity("agent-7", ("acme",)), Identity("finance:a", ("acme",), "person",
                                                            ("approver",))])
    key = local.signing_key("finance:a")
    assert stat.S_IMODE(local.key_file("finance:a").stat().st_mode) == 0o600
    again = LocalIdentities(tmp_path)
    again.ensure([Identity("finance:a", ("acme", "globex"), "person", ("approver",))])
    assert again.signing_key("finance:a").as_dict(private=True) == key.as_dict(private=True)
    principals = load_principals(again.principals_file)
    assert [p.id for p in principals.principals] == ["agent-7", "finance:a"], "kept, then updated"
    assert principals.get("finance:a").tenants == ("acme", "globex")
    token = sign(b"{}", key, principal_id="finance:a", tenant_id="globex")
    assert verify(b"{}", token, principals).principal_id == "finance:a"


def test_a_principal_never_listed_has_no_key(tmp_path):
    local = LocalIdentities(tmp_path)
    local.ensure([Identity("agent-7", ("acme",))])
    try:
        local.signing_key("mallory")
    except KeyError as error:
        assert "mallory" in str(error)
    else:
        raise AssertionError("a key for a principal nobody listed")
