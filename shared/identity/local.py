"""Identities for what runs on one machine: a principals file and the private keys that sign as
its principals, side by side in one folder.

``make demo``, the fault protocols, the benchmark and the tests run the services with signatures
required, as a deployment does; what they sign with is generated here on first use, into the
project's home (``.intentledger/``), never shipped and never read by a deployed service. A key
is kept once made, so a second demo signs with the same keys as the first; the principals file
is rewritten (atomically: the intake may be reading it) whenever a principal is added or
changed. Deployments write their own principals file and give each signer its own key
(docs/identity.md).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

import yaml

from shared.identity.principals import Kind, load_principals
from shared.identity.signatures import (SigningKey, generate_signing_key, load_signing_key,
                                        save_signing_key)


@dataclass(frozen=True)
class Identity:
    principal_id: str
    tenants: tuple[str, ...]
    kind: Kind = "agent"
    roles: tuple[str, ...] = field(default=())


DISPATCHER = Identity("dispatcher", ("*",), "service", ("compensator",))
"""The dispatcher's principal in every local run: it seals the compensations it proposes."""
DISPATCHER_KEY_ENV = "INTENTLEDGER_DISPATCHER_SIGNING_KEY_FILE"


class LocalIdentities:
    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)
        self.principals_file = self.directory / "principals.yaml"

    def ensure(self, identities: Iterable[Identity]) -> Path:
        """Every identity listed in the principals file with a key of its own (made if missing);
        principals already there and not named again are kept. Returns the principals file."""
        wanted = {identity.principal_id: identity for identity in identities}
        entries = {entry["id"]: entry for entry in self._entries()}
        for principal_id, identity in wanted.items():
            key = self._key(principal_id)
            entries[principal_id] = {
                "id": principal_id, "kind": identity.kind, "tenants": list(identity.tenants),
                "roles": list(identity.roles),
                "keys": [{"kid": key.kid, "jwk": key.as_dict(private=False)}]}
        text = yaml.safe_dump({"principals": list(entries.values())}, sort_keys=False)
        if not self.principals_file.exists() or self.principals_file.read_text() != text:
            staged = self.principals_file.with_suffix(".yaml.tmp")
            staged.write_text("# generated for local runs (shared/identity/local.py)\n" + text)
            os.replace(staged, self.principals_file)
            load_principals(self.principals_file)  # what we wrote must be a valid file
        return self.principals_file

    def signing_key(self, principal_id: str) -> SigningKey:
        """The private key of a principal ``ensure`` listed; KeyError for any other."""
        path = self._key_file(principal_id)
        if not path.exists():
            raise KeyError(f"no local key for {principal_id!r} in {self.directory}")
        return load_signing_key(path)

    def key_file(self, principal_id: str) -> Path:
        """Where the private JWK of ``principal_id`` is (for a CLI's ``--key``)."""
        self.signing_key(principal_id)
        return self._key_file(principal_id)

    def dispatcher_env(self) -> dict[str, str]:
        """What a dispatcher started here seals its compensation proposals with (``DISPATCHER``
        must be one of the identities ensured)."""
        return {DISPATCHER_KEY_ENV: str(self.key_file(DISPATCHER.principal_id))}

    def _key(self, principal_id: str) -> SigningKey:
        path = self._key_file(principal_id)
        if path.exists():
            return load_signing_key(path)
        key = generate_signing_key(f"{principal_id}.local")
        path.parent.mkdir(parents=True, exist_ok=True)
        save_signing_key(key, path)
        return key

    def _key_file(self, principal_id: str) -> Path:
        return self.directory / "keys" / f"{quote(principal_id, safe='')}.jwk"

    def _entries(self) -> list[dict]:
        if not self.principals_file.exists():
            return []
        return (yaml.safe_load(self.principals_file.read_text()) or {}).get("principals") or []
