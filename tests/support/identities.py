"""The test session's principals and the keys that sign as them.

The services under test require signatures, as their shipped settings do: the session makes a
principals file and a key per principal (``shared.identity.local``) and points every intake it
starts at it, through ``INTENTLEDGER_INTAKE_PRINCIPALS_FILE`` (service processes inherit it),
and every policy and dispatcher, which verify approvals and resolutions with the same file.
``console`` signs the console's resolutions for the person signed in (role
``publishes-for-people``); ``svc:impostor`` is a service without that role; ``mcp-gateway``
proposes as the agents it authenticates (role ``proposes-for-others``); ``dispatcher``
seals the compensations every dispatcher the session starts proposes
(``INTENTLEDGER_DISPATCHER_SIGNING_KEY_FILE``).
``agent-7`` and ``globex-agent`` act for one tenant each, as in the example principals file,
so that tests can attack the tenant binding; the other agents act for any tenant.

The session also makes the policy's capability keys (``capability/``): the policy signs with
``policy-test-1``; every verifier's public key set holds it and ``policy-test-2`` (a rotation
in progress: both valid); ``policy-test-0`` is a key rotated out, kept for the tests to sign
forgeries with. Exported as ``INTENTLEDGER_CAPABILITY_SIGNING_KEY_FILE`` and
``INTENTLEDGER_CAPABILITY_PUBLIC_KEYS_FILE``.
"""

from __future__ import annotations

import json
import os
import tempfile
import uuid
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from joserfc.jwk import OKPKey

from shared.capabilities import PublicKeys
from shared.identity.capability_keys import parse_public_keys
from shared.identity.local import DISPATCHER, Identity, LocalIdentities
from shared.operator.publish import Signer
from shared.identity.signatures import (PROPOSAL, generate_signing_key, load_signing_key,
                                        save_signing_key, sign)

SESSION = uuid.uuid4().hex[:6]
FRESH = {prefix: tuple(f"{prefix}-{SESSION}-{n}" for n in range(96)) for prefix in ("agent", "blocked")}
"""Principals of one test each (policy limits count per principal), by the prefix policies
match them with: the intake knows only the principals its file listed when it started, so they
are listed beforehand, named per session so that a rerun on the same database starts with
empty rate windows."""
PRINCIPALS = (
    # approvers too: a test can then show that even an approver never approves its own call
    *(Identity(principal_id, ("*",), roles=("approver",))
      for named in FRESH.values() for principal_id in named),
    Identity("agent-7", ("acme",)),
    Identity("globex-agent", ("globex",)),
    *(Identity(principal_id, ("*",)) for principal_id in (
        "user-42", "u-1", "agent-8", "mallory", "user:4471", "user:9120", "svc:billing-agent",
        "intern-3")),
    Identity("finance:a", ("acme",), "person", ("approver",)),
    Identity("finance:b", ("acme",), "person", ("approver",)),
    Identity("operator:dana", ("*",), "person", ("operator", "approver")),
    Identity("operator:eve", ("*",), "person", ("operator", "approver")),
    Identity("finance:eve", ("acme",), "person", ("approver",)),
    Identity("intern:bob", ("acme",), "person"),
    Identity("agent-approver", ("*",), "agent", ("approver",)),
    Identity("console", ("*",), "service", ("publishes-for-people",)),
    Identity("svc:impostor", ("*",), "service"),
    Identity("mcp-gateway", ("*",), "service", ("proposes-for-others",)),
    DISPATCHER,
)
DEFAULT_SIGNER = ("user-42", "acme")
"""Who signs a record whose body names nobody readable (the tests' garbage)."""
PRINCIPALS_ENV = "INTENTLEDGER_INTAKE_PRINCIPALS_FILE"
VERIFIERS_ENV = ("INTENTLEDGER_POLICY_PRINCIPALS_FILE", "INTENTLEDGER_DISPATCHER_PRINCIPALS_FILE")
CONSOLE_KEY_ENV = "INTENTLEDGER_CONSOLE_SIGNING_KEY_FILE"


_unused = {prefix: iter(named) for prefix, named in FRESH.items()}


def fresh_principal(prefix: str = "agent") -> str:
    """A principal no other test of this session proposes as, named ``<prefix>-…``."""
    try:
        return next(_unused[prefix])
    except StopIteration:
        raise RuntimeError(f"every FRESH[{prefix!r}] principal is taken: list more") from None


CAPABILITY_KID, ROTATING_KID, ROTATED_OUT_KID = "policy-test-1", "policy-test-2", "policy-test-0"
SIGNING_KEY_ENV = "INTENTLEDGER_CAPABILITY_SIGNING_KEY_FILE"
PUBLIC_KEYS_ENV = "INTENTLEDGER_CAPABILITY_PUBLIC_KEYS_FILE"


@cache
def local() -> LocalIdentities:
    """The session's identities, made once per test process; a service process started by a
    test finds the same file through the environment."""
    if known := os.environ.get("INTENTLEDGER_TEST_IDENTITIES"):
        return LocalIdentities(known)
    identities = LocalIdentities(Path(tempfile.mkdtemp(prefix="intentledger-identities-")))
    identities.ensure(PRINCIPALS)
    _capability_keys(identities.directory / "capability")
    os.environ["INTENTLEDGER_TEST_IDENTITIES"] = str(identities.directory)
    for name in (PRINCIPALS_ENV, *VERIFIERS_ENV):
        os.environ[name] = str(identities.principals_file)
    os.environ[CONSOLE_KEY_ENV] = str(identities.key_file("console"))
    os.environ.update(identities.dispatcher_env())
    return identities


def signer(principal_id: str, person: str | None = None) -> Signer:
    """How ``principal_id`` signs a decision (for ``person``, when it is a console)."""
    return Signer(local().signing_key(principal_id), principal_id, person)


def capability_key(kid: str = CAPABILITY_KID) -> OKPKey:
    """A private capability key of the session: the policy's, the other valid one, or the one
    rotated out."""
    key = load_signing_key(local().directory / "capability" / f"{kid}.jwk")
    assert isinstance(key, OKPKey)
    return key


def capability_public_keys() -> PublicKeys:
    return parse_public_keys(Path(os.environ[PUBLIC_KEYS_ENV]).read_text())


def _capability_keys(directory: Path) -> None:
    directory.mkdir()
    for kid in (CAPABILITY_KID, ROTATING_KID, ROTATED_OUT_KID):
        save_signing_key(generate_signing_key(kid), directory / f"{kid}.jwk")
    published = [load_signing_key(directory / f"{kid}.jwk").as_dict(private=False)
                 for kid in (CAPABILITY_KID, ROTATING_KID)]
    (directory / "public.jwks").write_text(json.dumps({"keys": published}))
    os.environ[SIGNING_KEY_ENV] = str(directory / f"{CAPABILITY_KID}.jwk")
    os.environ[PUBLIC_KEYS_ENV] = str(directory / "public.jwks")


def signature(value: bytes, principal_id: str | None = None, tenant_id: str | None = None, *,
              use: str = PROPOSAL, **options) -> bytes:
    """A signature header for ``value``, by the principal and for the tenant the body names
    unless given."""
    body_principal, body_tenant = _named(value)
    principal_id = principal_id or body_principal
    return sign(value, local().signing_key(principal_id), principal_id=principal_id,
                tenant_id=tenant_id or body_tenant, use=use, **options).encode()


def _named(value: bytes) -> tuple[str, str]:
    try:
        body = json.loads(value)
    except ValueError:
        return DEFAULT_SIGNER
    if not isinstance(body, dict):
        return DEFAULT_SIGNER
    principal, tenant = body.get("principal_id"), body.get("tenant_id")
    usable = isinstance(principal, str) and principal in {p.principal_id for p in PRINCIPALS}
    return (principal if usable else DEFAULT_SIGNER[0],
            tenant if isinstance(tenant, str) and tenant else DEFAULT_SIGNER[1])


@dataclass(frozen=True)
class Posing(Signer):
    """Signs as ``principal_id`` a record naming ``named``: the forgery services must refuse."""

    named: str = ""

    @property
    def acting(self) -> str:
        return self.named
