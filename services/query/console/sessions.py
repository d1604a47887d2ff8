"""Who is at the console: a signed session cookie (or the OIDC proxy's header), and the CSRF
token that proves a state-changing request came from the console's own page.

The cookie is ``base64(json).hmac``; nothing in it is secret, everything in it is signed, and
it expires on its own. The CSRF token is an HMAC of the session id, so it needs no storage
and cannot be derived without the secret; the page reads it from ``/console/api/me`` (a
same-origin request a foreign site cannot read) and sends it as a header.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import secrets
import time
from dataclasses import dataclass

from services.query.console.settings import ConsoleSettings
from services.query.access import Access
from services.query.settings import OPERATOR

COOKIE = "intentledger_console"


@dataclass(frozen=True)
class Viewer:
    """A person at the console."""

    operator_id: str
    tenant: str
    session_id: str
    expires_at: float

    @property
    def access(self) -> Access:
        return Access(tenant=None if self.tenant == OPERATOR else self.tenant)


class Sessions:
    def __init__(self, settings: ConsoleSettings) -> None:
        self._settings = settings
        secret = settings.session_secret.get_secret_value() if settings.session_secret else None
        self._key = (secret or secrets.token_hex(32)).encode()
        self._by_fingerprint = {self._sign(f"token|{token}"): user
                                for token, user in settings.tokens.items()}
        """A session names its token by fingerprint: a token taken out of the configuration
        (or given another tenant) ends its sessions at the next restart of the process."""

    def sign_in(self, token: str, now: float | None = None) -> tuple[Viewer, str] | None:
        """A new session for the person a pasted token names: the viewer and the cookie value
        that carries it; None for an unknown token (every known one is compared in constant
        time)."""
        found = None
        for known in self._settings.tokens:
            if token and hmac.compare_digest(known.encode(), token.encode()):
                found = known
        if found is None:
            return None
        user = self._settings.tokens[found]
        expires = (now or time.time()) + self._settings.session_hours * 3600
        viewer = Viewer(user.id, user.tenant, secrets.token_urlsafe(16), expires)
        body = base64.urlsafe_b64encode(json.dumps(
            {"sub": viewer.operator_id, "tenant": viewer.tenant, "sid": viewer.session_id,
             "exp": viewer.expires_at, "tok": self._sign(f"token|{found}")}).encode()).decode()
        return viewer, f"{body}.{self._sign(body)}"

    def from_cookie(self, value: str | None, now: float | None = None) -> Viewer | None:
        if not value or "." not in value:
            return None
        body, _, signature = value.rpartition(".")
        if not _same(self._sign(body), signature):
            return None
        try:
            claims = json.loads(base64.urlsafe_b64decode(body))
            viewer = Viewer(str(claims["sub"]), str(claims["tenant"]), str(claims["sid"]),
                            float(claims["exp"]))
            user = self._by_fingerprint.get(str(claims["tok"]))
        except (ValueError, KeyError, TypeError, binascii.Error):
            return None
        if user is None or (user.id, user.tenant) != (viewer.operator_id, viewer.tenant):
            return None
        return viewer if viewer.expires_at > (now or time.time()) else None

    def from_proxy(self, identity: str | None) -> Viewer | None:
        """The OIDC proxy's signed-in person, if the console is configured to believe it and
        knows their tenant."""
        if not identity or self._settings.identity_header is None:
            return None
        tenant = self._settings.identities.get(identity)
        if tenant is None:
            return None
        session = hashlib.sha256(f"proxy|{identity}".encode()).hexdigest()[:32]
        return Viewer(identity, tenant, session, float("inf"))

    def csrf_token(self, viewer: Viewer) -> str:
        return self._sign(f"csrf|{viewer.session_id}")

    def csrf_valid(self, viewer: Viewer, token: str | None) -> bool:
        return bool(token) and _same(self.csrf_token(viewer), token)

    def _sign(self, text: str) -> str:
        return hmac.new(self._key, text.encode(), hashlib.sha256).hexdigest()


def _same(expected: str, given: str) -> bool:
    """Constant-time, and any text a client sends is compared (as UTF-8 bytes), never raised on."""
    return hmac.compare_digest(expected.encode(), given.encode(errors="replace"))
