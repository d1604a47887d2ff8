"""The gateway's bearer tokens: a JWT only from the issuer, signed with its keys, unexpired and
for this gateway's own URL; a static token by its digest; either only for a listed principal
of one tenant."""

from __future__ import annotations

import hashlib
import json
import time

import pytest
from joserfc import jwt
from joserfc.jwk import ECKey, KeySet, OctKey

from services.mcp_gateway.callers import Caller
from services.mcp_gateway.tokens import GatewayTokenVerifier, load_static_tokens
from shared.identity.principals import Principals
from shared.identity.signatures import generate_signing_key

RESOURCE, ISSUER = "https://gw.example/mcp", "https://issuer.example"
ISSUER_KEY = ECKey.generate_key("P-256", {"kid": "iss-1"})
MINTED_ELSEWHERE = ECKey.generate_key("P-256", {"kid": "iss-1"})  # same kid, another key
PRINCIPALS = Principals.model_validate({"principals": [
    {"id": name, "kind": kind, "tenants": tenants,
     "keys": [{"kid": f"{name}-1", "jwk": generate_signing_key(f"{name}-1").as_dict(private=False)}]}
    for name, kind, tenants in (("agent-7", "agent", ["acme"]), ("agent-any", "agent", ["*"]),
                                ("finance:a", "person", ["acme"]),
                                ("two-tenants", "agent", ["acme", "globex"]))]})
STATIC = {hashlib.sha256(b"tok-7").hexdigest(): "agent-7",
          hashlib.sha256(b"tok-any").hexdigest(): "agent-any@globex",
          hashlib.sha256(b"tok-any-no-tenant").hexdigest(): "agent-any"}


def verifier(**options) -> GatewayTokenVerifier:
    return GatewayTokenVerifier(resource_url=RESOURCE, principals=lambda: PRINCIPALS, issuer=ISSUER,
                                keys=KeySet([ISSUER_KEY]), static=STATIC, static_scopes=["tools"],
                                **options)


def minted(key=ISSUER_KEY, alg: str = "ES256", **changes) -> str:
    claims = {"iss": ISSUER, "aud": RESOURCE, "sub": "agent-7", "exp": int(time.time()) + 60,
              "scope": "tools"} | changes
    return jwt.encode({"alg": alg, "kid": "iss-1"}, {k: v for k, v in claims.items()
                                                     if v is not None}, key)


async def caller(token: str) -> Caller | None:
    verified = await verifier().verify_token(token)
    return verified.caller if verified else None


async def test_a_jwt_of_the_issuer_for_this_gateway_names_its_principal_and_tenant():
    verified = await verifier().verify_token(minted())
    assert verified.caller == Caller("agent-7", "acme")
    assert (verified.resource, verified.scopes, verified.subject) == (RESOURCE, ["tools"], "agent-7")
    assert await caller(minted(aud=[RESOURCE, "https://other.example"])) == Caller("agent-7", "acme")


@pytest.mark.parametrize("token", [
    minted(aud="https://other.example/mcp"),  # RFC 8707: another audience
    minted(aud="https://gw.example/mcp/other"),
    minted(aud=None),
    minted(iss="https://evil.example"),
    minted(exp=int(time.time()) - 120),
    minted(exp=None),
    minted(sub=None),
    minted(key=MINTED_ELSEWHERE),  # not the issuer's key
    minted(key=OctKey.import_key("s" * 32), alg="HS256"),  # a shared secret is never accepted
    minted(sub="ghost"),  # valid, but for nobody listed
    minted(sub="agent-any"),  # a principal of every tenant: the token must name one
    minted(sub="agent-7", tenant="globex"),  # a tenant it may not act for
    minted(sub="two-tenants"),
    "tok-unknown", "", "a.b.c",
])
async def test_a_token_is_refused(token):
    assert await verifier().verify_token(token) is None


async def test_a_person_through_a_listed_agent_client_proposes_as_it_only_where_so_configured():
    through_agent = minted(sub="finance:a", client_id="agent-7")
    named = await verifier(agents_from_client_ids=True).verify_token(through_agent)
    assert named.caller == Caller("agent-7", "acme", "finance:a")
    assert await caller(through_agent) == Caller("finance:a", "acme"), "a client id is no agent"
    assert await caller(minted(sub="finance:a")) == Caller("finance:a", "acme")


async def test_a_static_token_is_known_by_its_digest_only():
    assert await caller("tok-7") == Caller("agent-7", "acme")
    assert await caller("tok-any") == Caller("agent-any", "globex")
    assert await caller("tok-any-no-tenant") is None
    assert (await verifier().verify_token("tok-7")).scopes == ["tools"]


def test_a_tokens_file_holding_anything_but_digests_is_refused(tmp_path):
    path = tmp_path / "tokens.json"
    path.write_text(json.dumps({"tok-7": "agent-7"}))  # a plaintext token
    with pytest.raises(ValueError, match="sha256"):
        load_static_tokens(path)
    path.write_text(json.dumps(STATIC))
    assert load_static_tokens(path) == STATIC


def test_an_empty_key_set_means_static_tokens_only(tmp_path):
    """What k8s/README.md puts in the Secret when no OAuth issuer is used."""
    from services.mcp_gateway.tokens import load_key_set

    empty = tmp_path / "issuer.jwks"
    empty.write_text('{"keys": []}')
    assert load_key_set(empty) is None and load_key_set(None) is None
