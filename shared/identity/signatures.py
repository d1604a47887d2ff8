"""Signed records: a compact JWS with a detached payload over a Kafka record's exact value bytes.

The signature travels in the record's ``intentledger-signature`` header; the value stays the
JSON the agent (or the person's tool) wrote, untouched, so any Kafka client can produce one
(``openssl``, a few lines of Go or JavaScript: see ``examples/``). Its protected header names
the key (``kid``) and binds who signed and for whom, and when: ``principal``, ``tenant``,
``iat`` and ``exp`` (seconds since the epoch). A verifier trusts nothing in the value before
``verify`` returns: the key must be one of the principals file's, usable when the record was
signed, the signature must hold over these very bytes, the lifetime must be at most
``MAX_LIFETIME_S`` and must contain *now* within ``CLOCK_SKEW_S``, and the principal must be
allowed to act for the tenant it names. Every refusal has a stable reason code.

All cryptography is joserfc's (RFC 7515, 7518, 8037); nothing here computes a signature.
Signing, and the header registry both sides use, are the agent client's
(``intentledger_client.signing``): an agent installs only that, and signs as the ledger checks.
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Any

from intentledger_client.signing import (AGENT_CLAIM, ALGORITHMS, APPROVAL, CANCELLATION, HEADER,
                                         MAX_LIFETIME_S, PERSON_CLAIM, PROPOSAL, REGISTRY, RESOLUTION,
                                         SIGNING_KEY_ENV, SIGNING_KEY_FILE_ENV, SigningKey,
                                         load_signing_key, parse_signing_key, sign,
                                         WITHDRAWAL, signing_key_from_env, typ)
from joserfc import jws
from joserfc.errors import JoseError, SecurityWarning
from joserfc.jwk import ECKey, OKPKey

from shared.identity.principals import Principals, PublicKey

__all__ = ["AGENT_CLAIM", "ALGORITHMS", "APPROVAL", "CANCELLATION", "CLOCK_SKEW_S", "HEADER",
           "MAX_LIFETIME_S",
           "PERSON_CLAIM", "PROPOSAL", "PROPOSES_FOR_OTHERS", "PUBLISHES_FOR_PEOPLE", "RESOLUTION",
           "SIGNING_KEY_ENV", "SIGNING_KEY_FILE_ENV", "IdentityReason", "SignatureRefused", "SignedBy",
           "SigningKey", "WITHDRAWAL", "generate_signing_key", "load_signing_key",
           "parse_signing_key", "save_signing_key", "sign", "signing_key_from_env", "verify", "verify_record"]

CLOCK_SKEW_S = 30
"""How far a signer's clock may be from the verifier's, either way."""
PUBLISHES_FOR_PEOPLE = "publishes-for-people"
PROPOSES_FOR_OTHERS = "proposes-for-others"
"""The role of a gateway that authenticates agents itself and proposes as them (``agent``)."""
_LATEST = 253402300799
"""9999-12-31T23:59:59Z: later claimed times are not times."""


class IdentityReason(StrEnum):
    """Why a signed record is refused; stable, callers branch on them."""

    SIGNATURE_MISSING = "signature_missing"
    SIGNATURE_MALFORMED = "signature_malformed"
    SIGNING_KEY_UNKNOWN = "signing_key_unknown"
    SIGNING_KEY_REVOKED = "signing_key_revoked"
    SIGNING_KEY_NOT_VALID = "signing_key_not_valid"
    SIGNATURE_INVALID = "signature_invalid"
    SIGNATURE_EXPIRED = "signature_expired"
    SIGNATURE_NOT_YET_VALID = "signature_not_yet_valid"
    SIGNATURE_LIFETIME_TOO_LONG = "signature_lifetime_too_long"
    SIGNATURE_FOR_ANOTHER_USE = "signature_for_another_use"
    TENANT_NOT_ALLOWED = "tenant_not_allowed_for_principal"
    SIGNATURE_PRINCIPAL_MISMATCH = "signature_principal_mismatch"
    """The record's body names another principal than the one that signed it."""
    SIGNATURE_TENANT_MISMATCH = "signature_tenant_mismatch"
    """The record's body names another tenant than the one its signature is for."""
    PRINCIPAL_LACKS_ROLE = "principal_lacks_role"
    """The one who acts (the signer, or the person it publishes for) lacks the record's role."""
    NOT_PUBLISHER_FOR_PEOPLE = "signer_not_publisher_for_people"
    """The signature names a person, and its signer may not publish for people."""
    PERSON_UNKNOWN = "person_unknown"
    """The signature names a person the principals file does not list."""
    NOT_PROPOSER_FOR_OTHERS = "signer_not_proposer_for_others"
    """The signature names a principal to propose as, and its signer may not propose for others."""
    DELEGATE_UNKNOWN = "delegate_unknown"
    """The signature names a principal to propose as that the principals file does not list."""


class SignatureRefused(Exception):
    def __init__(self, code: IdentityReason, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


@dataclass(frozen=True)
class SignedBy:
    """What a verified signature establishes: the value was written by ``principal_id``, for
    ``tenant_id``, with key ``kid``, between ``issued_at`` and ``expires_at``."""

    principal_id: str
    tenant_id: str
    kid: str
    issued_at: datetime
    expires_at: datetime
    person: str | None = None
    """The person the signer says it publishes for; whether that is trusted is the caller's
    question (``shared.identity.acting``), not the signature's."""
    agent: str | None = None
    """The principal the signer says it proposes as (``shared.identity.delegation``)."""


def verify(value: bytes, token: str | bytes | None, principals: Principals, *,
           use: str = PROPOSAL, now: datetime | None = None) -> SignedBy:
    """Who signed ``value`` for ``use``; raises ``SignatureRefused`` with the reason otherwise,
    whatever the token holds (it comes from the same untrusted record)."""
    if not token:
        raise SignatureRefused(IdentityReason.SIGNATURE_MISSING,
                               f"the record has no {HEADER} header")
    now = now or datetime.now(UTC)
    extracted, header = _parsed(token, value)
    if header.get("typ") != typ(use):
        raise SignatureRefused(IdentityReason.SIGNATURE_FOR_ANOTHER_USE,
                               f"signed as {header.get('typ')!r}, not {typ(use)!r}")
    found = principals.by_kid(header["kid"])
    if found is None:
        raise SignatureRefused(IdentityReason.SIGNING_KEY_UNKNOWN,
                               f"no principal has key {header['kid']!r}")
    principal, public = found
    if (why := public.unusable_at(now)) is not None:  # never at a time the signer claims
        code = (IdentityReason.SIGNING_KEY_REVOKED if why == "revoked"
                else IdentityReason.SIGNING_KEY_NOT_VALID)
        raise SignatureRefused(code, f"key {public.kid} of {principal.id} is {why}")
    _check_signature(extracted, public)
    issued, expires = _check_lifetime(header["iat"], header["exp"], now)
    if header["principal"] != principal.id:
        raise SignatureRefused(IdentityReason.SIGNATURE_INVALID,
                               f"key {public.kid} is {principal.id}'s, the signature names "
                               f"{header['principal']!r}")
    if not principal.acts_for(header["tenant"]):
        raise SignatureRefused(IdentityReason.TENANT_NOT_ALLOWED,
                               f"{principal.id} may not act for tenant {header['tenant']!r}")
    return SignedBy(principal.id, header["tenant"], public.kid, issued, expires,
                    header.get(PERSON_CLAIM), header.get(AGENT_CLAIM))


def verify_record(value: bytes, signatures: Sequence[bytes], principals: Principals, *,
                  use: str = PROPOSAL, now: datetime | None = None) -> SignedBy:
    """``verify`` for a record by its ``intentledger-signature`` headers: none is a missing
    signature, and two or more are malformed (which one would count is anybody's guess: none
    does)."""
    if len(signatures) > 1:
        raise SignatureRefused(IdentityReason.SIGNATURE_MALFORMED,
                               f"{len(signatures)} {HEADER} headers, one expected")
    return verify(value, signatures[0] if signatures else None, principals, use=use, now=now)


def _parsed(token: str | bytes, value: bytes) -> tuple[jws.CompactSignature, dict[str, Any]]:
    """The token's parts and protected header, every claim present and of its type."""
    try:
        raw = token if isinstance(token, bytes) else token.encode("ascii")
        parts = raw.split(b".")
        if len(parts) != 3 or parts[1]:
            raise ValueError("not a compact JWS with a detached payload")
        extracted = jws.extract_compact(raw, payload=value, registry=REGISTRY)
        header = extracted.protected
        REGISTRY.check_header(header)  # the claims' types: extracting checks none of them
    except (JoseError, ValueError) as error:  # UnicodeError is a ValueError
        raise SignatureRefused(IdentityReason.SIGNATURE_MALFORMED, str(error)) from None
    if header["alg"] not in ALGORITHMS:
        raise SignatureRefused(IdentityReason.SIGNATURE_MALFORMED,
                               f"algorithm {header['alg']!r}: only {', '.join(ALGORITHMS)}")
    for claim in ("iat", "exp"):
        if isinstance(header[claim], bool) or not 0 <= header[claim] <= _LATEST:
            raise SignatureRefused(IdentityReason.SIGNATURE_MALFORMED,
                                   f"{claim} {header[claim]!r} is not a time")
    if not isinstance(header.get("kid"), str):
        raise SignatureRefused(IdentityReason.SIGNATURE_MALFORMED, "the header names no kid")
    return extracted, header


def _check_signature(extracted: jws.CompactSignature, public: PublicKey) -> None:
    try:
        with warnings.catch_warnings():
            # RFC 9864 deprecates the name "EdDSA", not its Ed25519 signatures: older JOSE
            # libraries of agents still write it, and it verifies the same.
            warnings.filterwarnings("ignore", "EdDSA is deprecated", SecurityWarning)
            holds = jws.validate_compact(extracted, public.key, registry=REGISTRY)
    except JoseError as error:
        raise SignatureRefused(IdentityReason.SIGNATURE_INVALID,
                               f"key {public.kid} cannot verify it: {error}") from None
    if not holds:
        raise SignatureRefused(IdentityReason.SIGNATURE_INVALID,
                               f"the signature does not verify with key {public.kid}")


def _check_lifetime(iat: int, exp: int, now: datetime) -> tuple[datetime, datetime]:
    issued, expires = datetime.fromtimestamp(iat, UTC), datetime.fromtimestamp(exp, UTC)
    if exp <= iat:
        raise SignatureRefused(IdentityReason.SIGNATURE_MALFORMED,
                               f"expires ({exp}) no later than issued ({iat})")
    if exp - iat > MAX_LIFETIME_S:
        raise SignatureRefused(IdentityReason.SIGNATURE_LIFETIME_TOO_LONG,
                               f"signed for {exp - iat} s, at most {MAX_LIFETIME_S} s")
    if (issued - now).total_seconds() > CLOCK_SKEW_S:
        raise SignatureRefused(IdentityReason.SIGNATURE_NOT_YET_VALID,
                               f"issued at {issued.isoformat()}, after now + {CLOCK_SKEW_S} s")
    if (now - expires).total_seconds() > CLOCK_SKEW_S:
        raise SignatureRefused(IdentityReason.SIGNATURE_EXPIRED,
                               f"expired at {expires.isoformat()}")
    return issued, expires


def save_signing_key(key: SigningKey, path: str | Path) -> None:
    """The private JWK written where only its owner reads it (mode 0600); never over an
    existing file (FileExistsError): a key overwritten is a principal locked out."""
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as out:
        json.dump(key.as_dict(private=True), out)


def generate_signing_key(kid: str, curve: str = "Ed25519") -> SigningKey:
    if curve == "Ed25519":
        return OKPKey.generate_key("Ed25519", {"kid": kid})
    if curve == "P-256":
        return ECKey.generate_key("P-256", {"kid": kid})
    raise ValueError(f"unsupported curve {curve!r}: Ed25519 or P-256")
