"""Bearer tokens: the gateway as an OAuth 2.1 resource server (the MCP authorization spec).

A JWT is accepted only from the configured issuer, verified with the issuer's published keys
(a JWKS file), unexpired, and issued for this gateway: its ``aud`` must name the gateway's own
resource URL (RFC 8707), so a token an agent holds for another service is refused here, and a
token for this gateway is worth nothing elsewhere (it is never passed on: the gateway signs the
proposals with its own key). A static token per principal serves local use; the tokens file
holds only SHA-256 digests, so a leaked copy grants nothing.

Either way the token must stand for a principal of the principals file (``callers``); a valid
token for a principal nobody listed is refused like a forged one: 401.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
from collections.abc import Callable, Mapping
from pathlib import Path

from joserfc import jwt
from joserfc.errors import JoseError
from joserfc.jwk import KeySet

from services.mcp_gateway.callers import Caller, CallerToken, caller_of
from shared.identity.principals import Principals

log = logging.getLogger(__name__)
ALGORITHMS = ["RS256", "ES256", "EdDSA", "Ed25519", "PS256"]
"""Asymmetric only: a shared secret would let the gateway mint tokens too."""


def token_digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def load_static_tokens(path: Path | None) -> dict[str, str]:
    """``{sha256 hex: "principal" | "principal@tenant"}``; refuses a file holding anything else."""
    if path is None:
        return {}
    document = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(document, dict) or not all(
            isinstance(k, str) and len(k) == 64 and isinstance(v, str) for k, v in document.items()):
        raise ValueError(f"{path}: a JSON object of sha256 hex digest -> principal expected")
    return {digest.lower(): who for digest, who in document.items()}


def load_key_set(path: Path | None) -> KeySet | None:
    """The issuer's public keys; None without a file or with an empty set (``{"keys": []}``:
    static tokens only, as a Secret must hold some value)."""
    if path is None:
        return None
    document = json.loads(path.read_text("utf-8"))
    if isinstance(document, dict) and document.get("keys") == []:
        return None
    return KeySet.import_key_set(document)


class GatewayTokenVerifier:
    """``mcp.server.auth.provider.TokenVerifier``: a token, or None (answered 401)."""

    def __init__(self, *, resource_url: str, principals: Callable[[], Principals],
                 issuer: str | None = None, keys: KeySet | None = None,
                 static: Mapping[str, str] | None = None,
                 static_scopes: list[str] | None = None,
                 agents_from_client_ids: bool = False) -> None:
        """``static_scopes``: what a static token grants (the scopes the gateway requires);
        ``agents_from_client_ids``: ``callers.caller_of``'s."""
        if (issuer is None) != (keys is None):
            raise ValueError("an issuer and its keys (jwks_file) go together")
        self._resource, self._issuer, self._keys = resource_url, issuer, keys
        self._principals = principals
        self._static = dict(static or {})
        self._static_scopes = list(static_scopes or [])
        self._agents_from_client_ids = agents_from_client_ids

    async def verify_token(self, token: str) -> CallerToken | None:
        return self._static_token(token) or self._jwt(token)

    def _static_token(self, token: str) -> CallerToken | None:
        digest = token_digest(token)
        who = next((v for k, v in self._static.items() if hmac.compare_digest(k, digest)), None)
        if who is None:
            return None
        principal, _, tenant = who.partition("@")
        caller = caller_of(principal, {"tenant": tenant} if tenant else {}, self._principals())
        return self._accepted(token, caller, principal, self._static_scopes, None,
                              {"iss": "static"})

    def _jwt(self, token: str) -> CallerToken | None:
        if self._keys is None or token.count(".") != 2:
            return None
        try:
            decoded = jwt.decode(token, self._keys, algorithms=ALGORITHMS)
            jwt.JWTClaimsRegistry(
                iss={"essential": True, "value": self._issuer},
                aud={"essential": True, "value": self._resource},  # RFC 8707: our own URL
                exp={"essential": True}, sub={"essential": True}).validate(decoded.claims)
        except (JoseError, ValueError) as error:
            log.info("mcp-gateway: bearer token refused: %s", error)
            return None
        claims = decoded.claims
        caller = caller_of(str(claims["sub"]), claims, self._principals(),
                           agents_from_client_ids=self._agents_from_client_ids)
        scopes = str(claims.get("scope") or "").split()
        return self._accepted(token, caller, str(claims.get("client_id") or claims["sub"]),
                              scopes, int(claims["exp"]), claims)

    def _accepted(self, token: str, caller: Caller | None, client_id: str, scopes: list[str],
                  expires_at: int | None, claims: dict) -> CallerToken | None:
        if caller is None:
            log.info("mcp-gateway: a valid token names no listed principal for one tenant")
            return None
        return CallerToken(token=token, client_id=client_id, scopes=scopes, expires_at=expires_at,
                           resource=self._resource, subject=caller.principal_id, claims=claims,
                           caller=caller)
