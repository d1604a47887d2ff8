"""Console configuration, from ``INTENTLEDGER_CONSOLE_*`` environment variables.

Two ways to know who is at the console, both configured by environment:
- **tokens**: an operator pastes a bearer token once; the console answers with a signed,
  HttpOnly, SameSite=Strict session cookie. Each token names the person (recorded on every
  resolution they make) and the tenant they may see (``*``: every tenant).
- **an OIDC proxy** (oauth2-proxy, an ingress's auth) in front of the console, which puts the
  signed-in person in a header. The header is believed only when ``identity_header`` is set,
  only for identities ``identities`` maps to a tenant, and only on the console's own port
  (``port``): the query API's port is reached by API clients directly, any of which could
  send the header. The deployment lets nothing but the proxy reach the console's port.
No tokens and no proxy: nobody gets in (fail closed).

What a signed-in person resolves, the console publishes signed with its own key, naming the
person in the signature (``shared.identity.acting``): the dispatcher believes it only because
the console's principal has role ``publishes-for-people``. A console anyone can sign in to
refuses to start without that key.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import AliasChoices, BaseModel, Field, SecretStr, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from shared.identity.signatures import SigningKey, load_signing_key, parse_signing_key
from shared.topology import LEDGER_RESOLUTIONS


class ConsoleUser(BaseModel):
    id: str = Field(min_length=1, max_length=200, description="Recorded as the resolution's operator.")
    tenant: str = Field(min_length=1, description="The tenant whose rows they see; `*`: all.")


class ConsoleSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="INTENTLEDGER_CONSOLE_", extra="ignore")

    port: int | None = Field(default=None, ge=0, le=65535)
    """Serve the console (and the API for it) on this port of the query process instead of
    beside the API on ``INTENTLEDGER_QUERY_PORT``; required with ``identity_header``."""
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
    resolutions_topic: str = Field(default=LEDGER_RESOLUTIONS, validation_alias=AliasChoices(
        "resolutions_topic", "INTENTLEDGER_CONSOLE_RESOLUTIONS_TOPIC",
        "INTENTLEDGER_DISPATCHER_RESOLUTIONS_TOPIC"))
    """Where the resolve form publishes: the dispatcher's ``resolutions_topic``, read from the
    variable that configures the dispatcher unless the console's own says otherwise."""

    principal_id: str = "console"
    """The console's principal in the principals file (role ``publishes-for-people``)."""
    signing_key_file: Path | None = None
    """The console principal's private JWK; or ``signing_key``, the JWK's JSON itself."""
    signing_key: SecretStr | None = Field(default=None, repr=False)

    @property
    def key(self) -> SigningKey | None:
        if self.signing_key is not None:
            return parse_signing_key(self.signing_key.get_secret_value(),
                                     "INTENTLEDGER_CONSOLE_SIGNING_KEY")
        return load_signing_key(self.signing_key_file) if self.signing_key_file else None

    @model_validator(mode="after")
    def _a_key_for_anyone_signed_in(self) -> ConsoleSettings:
        if (self.tokens or self.identity_header) and not (self.signing_key or self.signing_key_file):
            raise ValueError("people can sign in to the console, and it has no signing key to "
                             "publish their resolutions with: set "
                             "INTENTLEDGER_CONSOLE_SIGNING_KEY_FILE (or _SIGNING_KEY)")
        return self

    @model_validator(mode="after")
    def _proxy_header_only_on_its_own_port(self) -> ConsoleSettings:
        if self.identity_header and self.port is None:
            raise ValueError("INTENTLEDGER_CONSOLE_IDENTITY_HEADER needs INTENTLEDGER_CONSOLE_PORT: "
                             "the header is believed only on a port that the proxy alone reaches")
        return self
