"""The signature an agent puts beside its record: a detached compact JWS over the exact bytes,
that a verifier holding only the public key accepts for its use, and nothing else."""

from __future__ import annotations

import json

import pytest
from joserfc import jws
from joserfc.jwk import ECKey, OKPKey

from intentledger_client.signing import (MAX_LIFETIME_S, PROPOSAL, REGISTRY, parse_signing_key,
                                         resolve_signing_key, sign, typ)

VALUE = b'{"format": "generic", "run_id": "r"}'


@pytest.mark.parametrize("key", [OKPKey.generate_key("Ed25519", {"kid": "k-1"}),
                                 ECKey.generate_key("P-256", {"kid": "k-2"})])
def test_the_signature_holds_over_the_exact_bytes_and_names_who_and_what(key: OKPKey | ECKey) -> None:
    token = sign(VALUE, key, principal_id="agent-7", tenant_id="acme")
    header, empty, _ = token.split(".")
    assert empty == ""  # detached: the record's value is the payload
    public = type(key).import_key(key.as_dict(private=False))
    extracted = jws.extract_compact(token.encode(), payload=VALUE, registry=REGISTRY)
    assert jws.validate_compact(extracted, public, registry=REGISTRY)
    claims = extracted.protected
    assert (claims["kid"], claims["typ"], claims["principal"], claims["tenant"]) == (
        key.kid, typ(PROPOSAL), "agent-7", "acme")
    assert 0 < claims["exp"] - claims["iat"] <= MAX_LIFETIME_S
    tampered = jws.extract_compact(token.encode(), payload=VALUE + b" ", registry=REGISTRY)
    assert not jws.validate_compact(tampered, public, registry=REGISTRY)


def test_a_signature_may_not_outlive_the_verifiers_limit() -> None:
    key = OKPKey.generate_key("Ed25519", {"kid": "k"})
    with pytest.raises(ValueError, match="at most"):
        sign(VALUE, key, principal_id="a", tenant_id="t", lifetime_s=MAX_LIFETIME_S + 1)


def test_a_key_without_its_private_half_or_kid_is_refused() -> None:
    key = OKPKey.generate_key("Ed25519", {"kid": "k"})
    with pytest.raises(ValueError, match="not a private JWK"):
        parse_signing_key(json.dumps(key.as_dict(private=False)))
    no_kid = {k: v for k, v in key.as_dict(private=True).items() if k != "kid"}
    with pytest.raises(ValueError, match="no kid"):
        parse_signing_key(json.dumps(no_kid))


def test_the_key_comes_from_the_environment_when_none_is_given(
        monkeypatch: pytest.MonkeyPatch) -> None:
    key = OKPKey.generate_key("Ed25519", {"kid": "env-key"})
    monkeypatch.setenv("INTENTLEDGER_SIGNING_KEY", json.dumps(key.as_dict(private=True)))
    found = resolve_signing_key(None)
    assert found is not None and found.kid == "env-key"


def test_a_client_given_a_signer_signs_every_record_with_it_and_not_with_a_key() -> None:
    """A gateway proposing for the principal it authenticated signs as itself."""
    from intentledger_client import Client
    from intentledger_client.signing import HEADER

    signed: list[tuple[bytes, str]] = []

    def signer(value: bytes, use: str) -> str:
        signed.append((value, use))
        return "the-gateways-jws"

    client = Client("127.0.0.1:1", principal_id="agent-7", tenant_id="acme", signer=signer)
    headers = dict(client._headers(b'{"run_id": "r"}'))
    assert headers[HEADER] == b"the-gateways-jws" and signed == [(b'{"run_id": "r"}', "proposal")]
