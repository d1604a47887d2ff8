"""A document signed over its own fields: a compact JWS with a detached payload (RFC 7515
appendix F) over the RFC 8785 form of every field but ``signature``.

For what a service writes into its outbox and another trusts: a capability (the policy's),
a compensation proposal (the dispatcher's). The relay publishes whatever an outbox row says,
so such a document is believed only for its signature, never for where it came from; and it
can wait in an outbox, a topic or a retry for as long as its own fields say it is valid,
which a record signature (``shared.identity.signatures``, minutes at most) cannot. Its
protected header names the key (``kid``) and the document's use (``typ``), so a signature made
for one kind of document never verifies for another.

All cryptography is joserfc's; nothing here computes a signature.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from joserfc import jws
from joserfc.errors import JoseError
from joserfc.jwk import ECKey, OKPKey
from pydantic import BaseModel

from shared.tools.jcs import jcs

SIGNATURE_PATTERN = r"^[A-Za-z0-9_-]+\.\.[A-Za-z0-9_-]+$"
"""A compact JWS whose payload is detached: header, nothing, signature."""
_REGISTRY = jws.JWSRegistry(algorithms=["Ed25519", "ES256"])
Key = OKPKey | ECKey
UNSIGNED = "e30..AA"
"""A value of a signature's shape, for a document built before it is sealed."""
Document = TypeVar("Document", bound=BaseModel)


def fields_of(document: BaseModel) -> dict[str, Any]:
    """What a document's seal is over: every field but ``signature``, in its JSON form (the
    form it is sent in, so the bytes checked later are the bytes sealed now)."""
    return document.model_dump(mode="json", exclude={"signature"})


def sealed_copy(document: Document, key: Key, typ: str) -> Document:
    """``document``, built with ``signature=UNSIGNED``, with its seal by ``key``."""
    return document.model_copy(update={"signature": seal(fields_of(document), key, typ)})


def seal(fields: Mapping[str, Any], key: Key, typ: str) -> str:
    """The signature of ``fields`` (JSON values, every field of the document but its
    signature) by ``key``, whose ``kid`` the verifier looks the public half up by."""
    if not key.kid:
        raise ValueError("the signing key has no kid")
    alg = "Ed25519" if isinstance(key, OKPKey) else "ES256"
    token = jws.serialize_compact({"alg": alg, "kid": key.kid, "typ": typ}, jcs(dict(fields)),
                                  key, registry=_REGISTRY)
    return jws.detach_compact_content(token)


class Unsealed(Exception):
    """Why a document's signature does not hold: ``reason`` is ``signature_invalid`` (not
    this document's signature, or not a signature at all) or ``key_unknown``."""

    def __init__(self, reason: str, kid: str | None = None) -> None:
        super().__init__(reason if kid is None else f"{reason} ({kid})")
        self.reason = reason
        self.kid = kid


def signer_of(fields: Mapping[str, Any], signature: str, typ: str,
              key_of: Callable[[str], Key | None]) -> str:
    """The ``kid`` that sealed ``fields``, once its key (``key_of(kid)``, None when unknown)
    verifies the signature over these very fields for ``typ``; raises ``Unsealed`` otherwise."""
    try:
        extracted = jws.extract_compact(signature.encode(), jcs(dict(fields)), _REGISTRY)
    except (JoseError, ValueError):
        raise Unsealed("signature_invalid") from None
    header = extracted.protected
    kid = header.get("kid")
    if not isinstance(kid, str):
        raise Unsealed("signature_invalid")
    public = key_of(kid)
    if public is None:
        raise Unsealed("key_unknown", kid)
    expected = "Ed25519" if isinstance(public, OKPKey) else "ES256"
    if header.get("typ") != typ or header.get("alg") != expected:
        raise Unsealed("signature_invalid", kid)
    try:
        holds = jws.validate_compact(extracted, public, registry=_REGISTRY)
    except (JoseError, ValueError):
        holds = False
    if not holds:
        raise Unsealed("signature_invalid", kid)
    return kid
