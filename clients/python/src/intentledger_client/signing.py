"""Signed records: a compact JWS with a detached payload over a Kafka record's exact value bytes.

The signature travels in the record's ``intentledger-signature`` header; the value stays the
JSON the agent wrote, untouched, so any Kafka client can produce one. Its protected header names
the key (``kid``) and binds who signed and for whom, and when: ``principal``, ``tenant``,
``iat`` and ``exp`` (seconds since the epoch), and what the record is (``typ``), so that a
signature made for one purpose never verifies for another. The ledger verifies with the same
header registry (``shared/identity/signatures.py``); all cryptography is joserfc's.
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from joserfc import jws
from joserfc.jwk import ECKey, OKPKey
from joserfc.registry import HeaderParameter

HEADER = "intentledger-signature"
"""The Kafka header that carries the compact, detached JWS."""
MAX_LIFETIME_S = 300
ALGORITHMS = ("Ed25519", "EdDSA", "ES256")
"""Ed25519 as RFC 9864 names it, and as older JOSE libraries still do; ES256 on P-256."""
PERSON_CLAIM = "person"
"""Optional: the person a service signs for (trusted only from a signer allowed to)."""
AGENT_CLAIM = "agent"
"""Optional, on proposals: the principal a gateway proposes as, its delegate (trusted only from a
signer allowed to; the record's body names it as the calls' principal)."""
_CLAIMS = {name: HeaderParameter(description, kind, required=True) for name, description, kind in (
    ("principal", "who signed", "str"), ("tenant", "for whom", "str"),
    ("iat", "issued at, seconds since the epoch", "int"),
    ("exp", "expires at, seconds since the epoch", "int"))}
_CLAIMS[PERSON_CLAIM] = HeaderParameter("the person the signer publishes for", "str")
_CLAIMS[AGENT_CLAIM] = HeaderParameter("the principal the signer proposes as", "str")
REGISTRY = jws.JWSRegistry(header_registry=_CLAIMS, algorithms=list(ALGORITHMS))
SigningKey = OKPKey | ECKey
PROPOSAL, APPROVAL, RESOLUTION, CANCELLATION, WITHDRAWAL = (
    "proposal", "approval", "resolution", "cancellation", "withdrawal")
"""What a signed record is (its ``typ``, ``intentledger-<use>+jws``, RFC 8725 §3.11)."""
SIGNING_KEY_ENV = "INTENTLEDGER_SIGNING_KEY"
SIGNING_KEY_FILE_ENV = "INTENTLEDGER_SIGNING_KEY_FILE"


def typ(use: str) -> str:
    return f"intentledger-{use}+jws"


def sign(value: bytes, key: SigningKey, *, principal_id: str, tenant_id: str,
         use: str = PROPOSAL, lifetime_s: int = 120, now: datetime | None = None,
         person: str | None = None, agent: str | None = None) -> str:
    """The header value for a record whose value is ``value``, signed with ``key`` (its ``kid``
    must be the one the principals file lists) for ``use``."""
    if not 0 < lifetime_s <= MAX_LIFETIME_S:
        raise ValueError(f"a signature lives at most {MAX_LIFETIME_S} s")
    kid = key.kid
    if not kid:
        raise ValueError("the signing key has no kid")
    issued = int((now or datetime.now(UTC)).timestamp())
    protected: dict[str, Any] = {
        "alg": "Ed25519" if isinstance(key, OKPKey) else "ES256", "kid": kid, "typ": typ(use),
        "principal": principal_id, "tenant": tenant_id, "iat": issued, "exp": issued + lifetime_s}
    if person is not None:
        protected[PERSON_CLAIM] = person
    if agent is not None:
        protected[AGENT_CLAIM] = agent
    token = jws.serialize_compact(protected, value, key, registry=REGISTRY)
    return jws.detach_content(token)


def load_signing_key(source: str | Path) -> SigningKey:
    """A private JWK (with its ``kid``) from a file."""
    return parse_signing_key(Path(source).expanduser().read_text(encoding="utf-8"), str(source))


def parse_signing_key(text: str, source: str = "the key") -> SigningKey:
    """A private JWK from its JSON text (e.g. a Kubernetes Secret in an environment variable)."""
    document = json.loads(text)
    if not isinstance(document, dict) or "d" not in document:
        raise ValueError(f"{source}: not a private JWK (signing needs its 'd')")
    if not document.get("kid"):
        raise ValueError(f"{source}: the JWK has no kid, so no principals file can name it")
    if document.get("kty") == "OKP":
        return OKPKey.import_key(document)
    return ECKey.import_key(document)


def signing_key_from_env() -> SigningKey | None:
    """The private JWK in ``INTENTLEDGER_SIGNING_KEY`` (its JSON), else in the file that
    ``INTENTLEDGER_SIGNING_KEY_FILE`` names, else None."""
    if text := os.environ.get(SIGNING_KEY_ENV):
        return parse_signing_key(text, SIGNING_KEY_ENV)
    if path := os.environ.get(SIGNING_KEY_FILE_ENV):
        return load_signing_key(path)
    return None


def resolve_signing_key(source: SigningKey | str | Path | None) -> SigningKey | None:
    """The key given (or the file it names), else the environment's."""
    if isinstance(source, str | Path):
        return load_signing_key(source)
    return source or signing_key_from_env()
