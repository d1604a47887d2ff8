"""A signed record proves who wrote these bytes, for whom, and when; every way of faking one is
refused with its own reason: a changed byte, another principal's key, a key nobody listed, a
revoked or expired key, a signature outside its time window, one claiming a tenant its
principal may not act for, and JOSE's own traps (``none``, an HMAC keyed with the public key,
an attached payload)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from datetime import UTC, datetime, timedelta

import pytest
from joserfc import jws
from joserfc.jwk import OKPKey

from shared.identity.principals import Principals
from shared.identity.signatures import (CLOCK_SKEW_S, MAX_LIFETIME_S, IdentityReason,
                                        SignatureRefused, generate_signing_key, sign, verify)

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
VALUE = json.dumps({"format": "generic", "run_id": "run-1", "principal_id": "agent-7",
                    "tenant_id": "acme", "tool": "wallet.debit", "call_id": "c-1",
                    "arguments": {"wallet_id": "w-1", "amount": "40.00",
                                  "currency": "EUR"}}).encode()
ACME = generate_signing_key("agent-7-2026-12")
ACME_EC = generate_signing_key("agent-8-p256", "P-256")
GLOBEX = generate_signing_key("globex-agent-1")
RETIRED = generate_signing_key("agent-7-2026-11")


def public(key, **limits) -> dict:
    return {"kid": key.kid, "jwk": key.as_dict(private=False), **limits}


def principals(**retired_limits) -> Principals:
    return Principals.model_validate({"principals": [
        {"id": "agent-7", "kind": "agent", "tenants": ["acme"],
         "keys": [public(ACME), public(RETIRED, **retired_limits)]},
        {"id": "agent-8", "kind": "agent", "tenants": ["acme"], "keys": [public(ACME_EC)]},
        {"id": "globex-agent", "kind": "agent", "tenants": ["globex"], "keys": [public(GLOBEX)]},
    ]})


PRINCIPALS = principals()


def refused(value: bytes, token, at: datetime = NOW, known: Principals = PRINCIPALS) -> str:
    with pytest.raises(SignatureRefused) as refusal:
        verify(value, token, known, now=at)
    return refusal.value.code


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def test_a_signed_record_names_who_signed_for_whom_and_when():
    token = sign(VALUE, ACME, principal_id="agent-7", tenant_id="acme", now=NOW)
    signed = verify(VALUE, token, PRINCIPALS, now=NOW + timedelta(seconds=5))
    assert (signed.principal_id, signed.tenant_id, signed.kid) == ("agent-7", "acme", ACME.kid)
    assert signed.expires_at - signed.issued_at == timedelta(seconds=120)
    assert token.split(".")[1] == ""  # detached: the value is never copied into the header


def test_es256_signatures_verify_too():
    token = sign(VALUE, ACME_EC, principal_id="agent-8", tenant_id="acme", now=NOW)
    assert verify(VALUE, token, PRINCIPALS, now=NOW).principal_id == "agent-8"


def test_an_eddsa_labelled_signature_of_an_older_jose_library_verifies():
    protected = {"alg": "EdDSA", "kid": ACME.kid, "typ": "intentledger-proposal+jws",
                 "principal": "agent-7", "tenant": "acme",
                 "iat": int(NOW.timestamp()), "exp": int(NOW.timestamp()) + 60}
    header = _b64(json.dumps(protected).encode())
    signature = ACME.private_key.sign(f"{header}.{_b64(VALUE)}".encode())
    assert verify(VALUE, f"{header}..{_b64(signature)}", PRINCIPALS, now=NOW).kid == ACME.kid


@pytest.mark.parametrize("change", [
    lambda v: v.replace(b"40.00", b"4000.00"), lambda v: v.replace(b"acme", b"acmf"),
    lambda v: v + b" ", lambda v: v[:-1]])
def test_a_changed_byte_of_the_value_is_refused(change):
    token = sign(VALUE, ACME, principal_id="agent-7", tenant_id="acme", now=NOW)
    assert refused(change(VALUE), token) == IdentityReason.SIGNATURE_INVALID


def test_a_missing_signature_is_refused():
    assert refused(VALUE, None) == IdentityReason.SIGNATURE_MISSING
    assert refused(VALUE, "") == IdentityReason.SIGNATURE_MISSING


def test_globex_signing_as_acme_is_refused():
    """globex's own key, claiming acme: the key's principal may not act for acme."""
    as_acme = sign(VALUE, GLOBEX, principal_id="globex-agent", tenant_id="acme", now=NOW)
    assert refused(VALUE, as_acme) == IdentityReason.TENANT_NOT_ALLOWED


def test_a_key_claiming_another_principal_is_refused():
    """globex's key naming agent-7 as the signer: a key speaks for its own principal only."""
    impostor = sign(VALUE, GLOBEX, principal_id="agent-7", tenant_id="globex", now=NOW)
    assert refused(VALUE, impostor) == IdentityReason.SIGNATURE_INVALID


def test_a_key_nobody_listed_is_refused_even_under_a_listed_kid():
    stranger = generate_signing_key("stranger")
    assert refused(VALUE, sign(VALUE, stranger, principal_id="agent-7", tenant_id="acme",
                               now=NOW)) == IdentityReason.SIGNING_KEY_UNKNOWN
    forger = OKPKey.generate_key("Ed25519", {"kid": ACME.kid})  # a listed kid, another key
    assert refused(VALUE, sign(VALUE, forger, principal_id="agent-7", tenant_id="acme",
                               now=NOW)) == IdentityReason.SIGNATURE_INVALID


def test_a_revoked_key_is_refused_from_its_revocation_on_whatever_the_signature_claims():
    revoked = principals(revoked_at=(NOW - timedelta(seconds=1)).isoformat())
    backdated = sign(VALUE, RETIRED, principal_id="agent-7", tenant_id="acme",
                     now=NOW - timedelta(seconds=60))
    assert refused(VALUE, backdated, known=revoked) == IdentityReason.SIGNING_KEY_REVOKED
    fine = principals(revoked_at=(NOW + timedelta(seconds=1)).isoformat())
    assert verify(VALUE, backdated, fine, now=NOW).kid == RETIRED.kid


def test_a_rotated_out_key_is_refused_and_its_successor_accepted():
    rotated = principals(not_after=NOW.isoformat())
    old = sign(VALUE, RETIRED, principal_id="agent-7", tenant_id="acme", now=NOW)
    assert refused(VALUE, old, known=rotated) == IdentityReason.SIGNING_KEY_NOT_VALID
    new = sign(VALUE, ACME, principal_id="agent-7", tenant_id="acme", now=NOW)
    assert verify(VALUE, new, rotated, now=NOW).kid == ACME.kid
    early = principals(not_before=(NOW + timedelta(hours=1)).isoformat())
    assert refused(VALUE, old, known=early) == IdentityReason.SIGNING_KEY_NOT_VALID


def test_the_time_window_holds_at_its_edges():
    token = sign(VALUE, ACME, principal_id="agent-7", tenant_id="acme", now=NOW,
                 lifetime_s=60)
    expires = NOW + timedelta(seconds=60)
    assert verify(VALUE, token, PRINCIPALS, now=expires + timedelta(seconds=CLOCK_SKEW_S))
    assert refused(VALUE, token, at=expires + timedelta(seconds=CLOCK_SKEW_S + 1)) \
        == IdentityReason.SIGNATURE_EXPIRED
    assert verify(VALUE, token, PRINCIPALS, now=NOW - timedelta(seconds=CLOCK_SKEW_S))
    assert refused(VALUE, token, at=NOW - timedelta(seconds=CLOCK_SKEW_S + 1)) \
        == IdentityReason.SIGNATURE_NOT_YET_VALID


def test_a_signature_living_longer_than_the_maximum_is_refused():
    with pytest.raises(ValueError):
        sign(VALUE, ACME, principal_id="agent-7", tenant_id="acme", lifetime_s=MAX_LIFETIME_S + 1)
    long_lived = _signed_by_hand({"exp": int(NOW.timestamp()) + MAX_LIFETIME_S + 1})
    assert refused(VALUE, long_lived) == IdentityReason.SIGNATURE_LIFETIME_TOO_LONG


def _signed_by_hand(overrides: dict, alg: str = "Ed25519") -> str:
    protected = {"alg": alg, "kid": ACME.kid, "typ": "intentledger-proposal+jws",
                 "principal": "agent-7", "tenant": "acme",
                 "iat": int(NOW.timestamp()), "exp": int(NOW.timestamp()) + 60, **overrides}
    header = _b64(json.dumps(protected).encode())
    signature = ACME.private_key.sign(f"{header}.{_b64(VALUE)}".encode())
    return f"{header}..{_b64(signature)}"


def test_joses_traps_are_refused():
    unsigned = _b64(json.dumps({"alg": "none", "kid": ACME.kid, "principal": "agent-7",
                                "tenant": "acme", "iat": 1, "exp": 2}).encode()) + ".."
    assert refused(VALUE, unsigned) == IdentityReason.SIGNATURE_MALFORMED
    header = _b64(json.dumps({"alg": "HS256", "kid": ACME.kid, "principal": "agent-7",
                              "tenant": "acme", "iat": int(NOW.timestamp()),
                              "exp": int(NOW.timestamp()) + 60}).encode())
    secret = json.dumps(ACME.as_dict(private=False)).encode()  # the key everyone can read
    mac = hmac.new(secret, f"{header}.{_b64(VALUE)}".encode(), hashlib.sha256).digest()
    assert refused(VALUE, f"{header}..{_b64(mac)}") == IdentityReason.SIGNATURE_MALFORMED
    attached = jws.serialize_compact(
        {"alg": "Ed25519", "kid": ACME.kid, "principal": "agent-7", "tenant": "acme",
         "iat": int(NOW.timestamp()), "exp": int(NOW.timestamp()) + 60}, VALUE, ACME,
        registry=jws.JWSRegistry(strict_check_header=False, algorithms=["Ed25519"]))
    assert refused(VALUE, attached) == IdentityReason.SIGNATURE_MALFORMED
    assert refused(VALUE, "not-a-jws") == IdentityReason.SIGNATURE_MALFORMED
    assert refused(VALUE, _signed_by_hand({"iat": "now"})) == IdentityReason.SIGNATURE_MALFORMED


def test_a_signature_made_for_another_use_is_refused():
    """An approval's signature never passes for a proposal's, even over the same bytes."""
    approval = sign(VALUE, ACME, principal_id="agent-7", tenant_id="acme", use="approval", now=NOW)
    assert verify(VALUE, approval, PRINCIPALS, use="approval", now=NOW).kid == ACME.kid
    assert refused(VALUE, approval) == IdentityReason.SIGNATURE_FOR_ANOTHER_USE
    assert refused(VALUE, _signed_by_hand({"typ": None})) == IdentityReason.SIGNATURE_MALFORMED


@pytest.mark.parametrize("token", [
    "é.x.y".encode("latin-1"), b"\xff\xfe..", "ünïcode..sig", "a" * 100_000 + "..b",
    _b64(b"[]") + "..x", _b64(b"not json") + "..x", _b64(b'{"alg": "Ed25519"}') + "..x",
])
def test_hostile_tokens_are_refused_as_malformed_never_with_another_error(token):
    assert refused(VALUE, token) == IdentityReason.SIGNATURE_MALFORMED


@pytest.mark.parametrize("claims", [
    {"iat": 10**20}, {"exp": 10**20}, {"iat": -10**15}, {"iat": True}, {"exp": 1.5},
    {"iat": None}, {"kid": 7}, {"kid": None}, {"principal": ["agent-7"]}, {"tenant": {}},
    {"exp": int(NOW.timestamp()) - 1},
])
def test_claims_of_the_wrong_type_or_range_are_refused_as_malformed(claims):
    assert refused(VALUE, _signed_by_hand(claims)) == IdentityReason.SIGNATURE_MALFORMED
