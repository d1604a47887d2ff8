"""Console configuration, from ``INTENTLEDGER_CONSOLE_*`` environment variables.

Two ways to know who is at the console, both configured by environment:
- **tokens**: an operator pastes a bearer token once; the console answers with a signed,
  HttpOnly, SameSite=Strict session cookie. Each token names the person (recorded on every
  repair they make) and the tenant they may see (``*``: every tenant).
- **an OIDC proxy** (oauth2-proxy, an ingress's auth) in front of the console, which puts the
  signed-in person in a header. The header is believed only when ``identity_header`` is set,
  and only for identities ``identities`` maps to a tenant: the deployment must make sure
  nothing but the proxy can reach the console.
No tokens and no proxy: nobody gets in (fail closed).
"""

from __future__ import annotations

from pydantic import BaseModel, Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict


class ConsoleUser(BaseModel):
    id: str = Field(min_length=1, max_length=200, description="Recorded as the repair's operator.")
    tenant: str = Field(min_length=1, description="The tenant whose rows they see; `*`: all.")


class ConsoleSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="INTENTLEDGER_CONSOLE_", extra="ignore")

    tokens: dict[str, ConsoleUser] = Field(default={}, repr=False)
    """JSON ``{"<token>": {"id": "operator:dana", "tenant": "*"}}``."""
    identity_header: str | None = None
    """E.g. ``X-Forwarded-Email``: the signed-in person, as the OIDC proxy in front says."""
    identities: dict[str, str] = {}
    """JSON ``{"dana@example.com": "*", "ops@acme.example": "acme"}`` for ``identity_header``."""
    session_secret: SecretStr | None = Field(default=None, repr=False)
    """Signs session cookies and CSRF tokens; replicas behind one address must share it.
    Unset: a random one per process (sessions end when it restarts)."""
    session_hours: float = Field(default=8.0, gt=0)
    resolve_timeout_s: float = Field(default=30.0, gt=0)
    """How long the resolve form waits for the dispatcher's verdict before answering pending."""
