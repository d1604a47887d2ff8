"""The principals file holds public keys only, names each key once, and says which tenants
and roles each principal has; a file that breaks any of that is refused with the place."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from shared.identity.principals import (PrincipalsError, PrincipalsWatcher, load_principals,
                                        parse_principals)
from shared.identity.signatures import (IdentityReason, SignatureRefused, generate_signing_key,
                                        sign, verify)

EXAMPLE = Path(__file__).resolve().parents[3] / "config" / "principals.example.yaml"
KEY = generate_signing_key("k-1")


def document(*principals: dict) -> str:
    return yaml.safe_dump({"principals": list(principals)})


def agent(id: str = "agent-7", keys: list | None = None, **fields) -> dict:
    return {"id": id, "kind": "agent", "tenants": ["acme"],
            "keys": [{"kid": "k-1", "jwk": KEY.as_dict(private=False)}] if keys is None else keys,
            **fields}


def test_the_example_file_loads_with_its_people_agents_and_services():
    principals = load_principals(EXAMPLE)
    assert {p.kind for p in principals.principals} == {"agent", "person", "service"}
    assert principals.get("finance:a").has_role("approver")
    assert principals.get("operator:dana").acts_for("any-tenant")
    assert not principals.get("globex-agent").acts_for("acme")
    assert principals.by_kid("globex-agent-1")[0].id == "globex-agent"


@pytest.mark.parametrize("principals, reported", [
    ((agent(keys=[{"kid": "k-1", "jwk": KEY.as_dict(private=True)}]),), "private key"),
    ((agent(), agent("agent-8")), "key ids (kid) repeat: k-1"),
    ((agent(), agent(keys=[{"kid": "k-2", "jwk": generate_signing_key("k-2").as_dict(
        private=False)}])), "principal ids repeat: agent-7"),
    ((agent(keys=[{"kid": "k-9", "jwk": KEY.as_dict(private=False)}]),), "the JWK names kid"),
    ((agent(keys=[{"kid": "k-1", "jwk": {"kty": "oct", "k": "c2VjcmV0"}}]),), "Ed25519 (OKP)"),
    ((agent(keys=[]),), "at least 1"),
    ((agent(tenants=[]),), "at least 1"),
    ((agent(kind="robot"),), "kind"),
    ((agent(keys=[{"kid": "k-1", "jwk": {**KEY.as_dict(private=False), "x": "AAAA"}}]),),
     "not a valid public key"),
    ((agent(keys=[{"kid": "k-1", "jwk": {**KEY.as_dict(private=False), "use": "enc"}}]),),
     "not for signatures"),
    ((agent(keys=[{"kid": "k-1", "jwk": {**KEY.as_dict(private=False), "alg": "ES256"}}]),),
     "cannot sign with 'ES256'"),
    ((agent(keys=[{"kid": "k-1", "jwk": KEY.as_dict(private=False),
                   "not_before": "2026-12-02T00:00:00Z", "not_after": "2026-12-01T00:00:00Z"}]),),
     "not_after is not after not_before"),
])
def test_a_bad_principals_file_is_refused_with_the_reason(principals, reported):
    with pytest.raises(PrincipalsError, match="principals.yaml") as refusal:
        parse_principals(document(*principals), "principals.yaml")
    assert reported in str(refusal.value)


def test_a_missing_file_is_refused_with_its_name(tmp_path):
    with pytest.raises(PrincipalsError, match="nowhere.yaml"):
        load_principals(tmp_path / "nowhere.yaml")


async def test_a_revocation_takes_effect_on_reload_and_a_bad_edit_changes_nothing(tmp_path):
    path = tmp_path / "principals.yaml"
    path.write_text(document(agent()), encoding="utf-8")
    watcher = PrincipalsWatcher(path)
    token = sign(b"{}", KEY, principal_id="agent-7", tenant_id="acme")
    assert verify(b"{}", token, watcher.current).kid == "k-1"
    path.write_text("principals: [\n", encoding="utf-8")
    assert await watcher.reload() is None
    assert verify(b"{}", token, watcher.current).kid == "k-1"
    revoked = {"kid": "k-1", "jwk": KEY.as_dict(private=False),
               "revoked_at": "2020-01-01T00:00:00Z"}
    path.write_text(document(agent(keys=[revoked])), encoding="utf-8")
    assert await watcher.reload() is watcher.current
    with pytest.raises(SignatureRefused) as refusal:
        verify(b"{}", token, watcher.current)
    assert refusal.value.code == IdentityReason.SIGNING_KEY_REVOKED
