"""Who may act: the principals file.

Each principal has an id, a kind (an agent, a person, a service), the tenants it may act for,
its roles (``approver``, ``operator``, ...) and the public keys its signatures verify with.
Only public keys are ever written here: the file can be reviewed, committed and shipped like
the policy, and a leaked copy grants nothing. Every key is named by a ``kid`` unique across the
file, so a signature names exactly one principal; a key may be limited in time and revoked
(``revoked_at``) without being removed, so that a signature made with it after the revocation
is refused for that reason rather than as an unknown key.
"""

from __future__ import annotations

import hashlib
from datetime import datetime
from functools import cached_property
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any, Literal

from joserfc.errors import JoseError
from joserfc.jwk import ECKey, OKPKey
from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, field_validator, model_validator

from shared.tools.jcs import jcs
from shared.watched_file import WatchedFile
from shared.yaml_documents import parse_document, read_document

Kind = Literal["agent", "person", "service"]
_ID = r"^[A-Za-z0-9][A-Za-z0-9._:@-]{0,199}$"
_CURVES = {("OKP", "Ed25519"), ("EC", "P-256")}
"""The key types a signature may use: Ed25519 (EdDSA) and P-256 (ES256)."""
_ALGORITHM = {"OKP": "Ed25519", "EC": "ES256"}
_ALGORITHMS = {"OKP": ("Ed25519", "EdDSA"), "EC": ("ES256",)}


class PrincipalsError(ValueError):
    """The principals file cannot be used; the message says where and why."""


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class PublicKey(_Frozen):
    kid: str = Field(pattern=_ID)
    jwk: dict[str, Any] = Field(description="The public JWK (RFC 7517): kty, crv, x (and y).")
    not_before: AwareDatetime | None = None
    not_after: AwareDatetime | None = None
    revoked_at: AwareDatetime | None = None

    @field_validator("jwk")
    @classmethod
    def _public_and_supported(cls, jwk: dict[str, Any]) -> dict[str, Any]:
        if "d" in jwk:
            raise ValueError("a private key (it has 'd'): the file holds public keys only")
        if (jwk.get("kty"), jwk.get("crv")) not in _CURVES:
            raise ValueError("the key must be an Ed25519 (OKP) or P-256 (EC) public JWK")
        if jwk.get("use", "sig") != "sig":
            raise ValueError(f"a key for use {jwk['use']!r}, not for signatures ('sig')")
        if jwk.get("alg", _ALGORITHM[jwk["kty"]]) not in _ALGORITHMS[jwk["kty"]]:
            raise ValueError(f"a {jwk['kty']} key cannot sign with {jwk['alg']!r}")
        try:
            _imported(jwk)  # the point must be one of the curve's: refused here, not per record
        except (JoseError, ValueError, TypeError) as error:
            raise ValueError(f"not a valid public key: {error}") from None
        return jwk

    @model_validator(mode="after")
    def _one_name(self) -> PublicKey:
        if self.jwk.get("kid", self.kid) != self.kid:
            raise ValueError(f"the JWK names kid {self.jwk['kid']!r}, the entry {self.kid!r}")
        if self.not_before and self.not_after and self.not_after <= self.not_before:
            raise ValueError("not_after is not after not_before")
        return self

    @cached_property
    def key(self) -> OKPKey | ECKey:
        """The JWK as joserfc's key, imported once per file version."""
        return _imported(self.jwk)

    def unusable_at(self, instant: datetime) -> str | None:
        """Why the key cannot be used at ``instant``, or None."""
        if self.revoked_at is not None and instant >= self.revoked_at:
            return "revoked"
        if self.not_before is not None and instant < self.not_before:
            return "not valid yet"
        if self.not_after is not None and instant >= self.not_after:
            return "expired"
        return None


class Principal(_Frozen):
    id: str = Field(pattern=_ID)
    kind: Kind
    tenants: tuple[str, ...] = Field(min_length=1, description=(
        "Tenants it may act for; shell-style patterns (`*` is every tenant: a platform "
        "operator's)."))
    roles: tuple[str, ...] = ()
    keys: tuple[PublicKey, ...] = Field(min_length=1)

    def acts_for(self, tenant_id: str) -> bool:
        return any(fnmatchcase(tenant_id, pattern) for pattern in self.tenants)

    def has_role(self, role: str) -> bool:
        return role in self.roles


class Principals(_Frozen):
    principals: tuple[Principal, ...]

    @model_validator(mode="after")
    def _unique(self) -> Principals:
        ids = [principal.id for principal in self.principals]
        kids = [key.kid for principal in self.principals for key in principal.keys]
        for what, names in (("principal ids", ids), ("key ids (kid)", kids)):
            repeated = sorted({name for name in names if names.count(name) > 1})
            if repeated:
                raise ValueError(f"{what} repeat: {', '.join(repeated)}")
        return self

    @cached_property
    def version(self) -> str:
        """SHA-256 of the canonical JSON of the parsed file: what a reload compares."""
        return hashlib.sha256(jcs(self.model_dump(mode="json"))).hexdigest()[:16]

    def by_kid(self, kid: str) -> tuple[Principal, PublicKey] | None:
        return next(((principal, key) for principal in self.principals for key in principal.keys
                     if key.kid == kid), None)

    def get(self, principal_id: str) -> Principal | None:
        return next((p for p in self.principals if p.id == principal_id), None)


def parse_principals(text: str, source: str = "<principals>") -> Principals:
    return parse_document(text, source, Principals, PrincipalsError, top="principals",
                          label=lambda entry: str(entry.get("id") or entry.get("kid")))


def load_principals(path: str | Path) -> Principals:
    """The principals of ``path``; raises PrincipalsError when it cannot be read or is invalid."""
    return parse_principals(*read_document(path, "the principals file", PrincipalsError))


class PrincipalsWatcher(WatchedFile[Principals]):
    """The principals in force: a new key or a revocation takes effect within ``interval_s``
    of the file's edit, without a restart; an invalid edit leaves the previous file in force."""

    def __init__(self, path: str | Path, interval_s: float = 5.0) -> None:
        super().__init__(path, load_principals, lambda principals: principals.version,
                         PrincipalsError, "principals", interval_s)


def _imported(jwk: dict[str, Any]) -> OKPKey | ECKey:
    return (OKPKey if jwk["kty"] == "OKP" else ECKey).import_key(jwk)
