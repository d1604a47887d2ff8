"""MCP gateway configuration, from ``INTENTLEDGER_MCP_GATEWAY_*`` environment variables."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from shared.topology import AGENT_PROPOSALS, AGENT_RESULTS, LEDGER_APPROVALS

_CONFIG = Path(__file__).resolve().parents[2] / "config"
OPERATION_KEY_META = "io.intentledger/operation_key"
"""The ``_meta`` field of ``tools/call`` that carries the caller's operation key."""


class GatewaySettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="INTENTLEDGER_MCP_GATEWAY_", extra="ignore")

    host: str = "127.0.0.1"
    port: int = Field(default=8095, ge=0, le=65535)
    resource_url: str = "http://127.0.0.1:8095/mcp"
    """This gateway's own URL (RFC 8707 resource, RFC 9728 ``resource``): a bearer token must
    name it as its audience. Behind a hostname, set it to the public URL."""
    allowed_hosts: list[str] = ["127.0.0.1:*", "localhost:*"]
    """Host headers served (DNS-rebinding protection); others are answered 421."""
    issuer_url: str | None = None
    """The OAuth authorization server whose JWTs are accepted (with ``jwks_file``)."""
    jwks_file: Path | None = None
    """The issuer's public keys (a JWKS document), read at start."""
    tokens_file: Path | None = None
    """Static bearer tokens for local use: ``{"<sha256 hex of the token>": "<principal>"}``
    (or ``"<principal>@<tenant>"``); never the tokens themselves."""
    agents_from_client_ids: bool = False
    """A person's JWT through a client whose ``client_id`` is a listed agent proposes as that
    agent for the person. Only where the issuer names its clients (no open registration)."""
    required_scopes: list[str] = []
    """Scopes a JWT must carry (static tokens carry every scope)."""
    principal_id: str = "mcp-gateway"
    """The gateway's own principal (role ``proposes-for-others``), whose key signs."""
    signing_key_file: Path | None = None
    """The gateway's private JWK; else ``INTENTLEDGER_SIGNING_KEY(_FILE)``."""
    principals_file: Path = _CONFIG / "principals.example.yaml"
    tools_file: Path = _CONFIG / "tools.example.yaml"
    policy_file: Path = _CONFIG / "policy.example.yaml"
    """Read to list each caller only the tools its policy could ever allow."""
    proposals_topic: str = AGENT_PROPOSALS
    approvals_topic: str = LEDGER_APPROVALS
    """Where it withdraws its callers' calls awaiting approval (``tasks/cancel``)."""
    results_family: str = AGENT_RESULTS
    stdio_caller: str | None = None
    """``principal@tenant``: serve MCP on stdin/stdout, as that caller, for the one local client
    that starts this process (no HTTP, no token); unset: streamable HTTP."""
    wait_s: float = Field(default=25.0, gt=0)
    """How long a ``tools/call`` waits for the settled outcome before answering pending."""
    client_idle_s: float = Field(default=300.0, gt=0)
    """A caller's ledger client (Kafka connections, a reader per partition) unused this long
    is closed; the caller's next call opens one again."""
    max_clients: int = Field(default=256, ge=1)
    """Open ledger clients beyond this many: the least recently used idle ones are closed."""
