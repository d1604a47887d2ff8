"""Where the policy's capability key and everyone's public key set come from.

The policy signs with a private Ed25519 JWK that is its alone
(``INTENTLEDGER_CAPABILITY_SIGNING_KEY``, the JWK's JSON, or
``INTENTLEDGER_CAPABILITY_SIGNING_KEY_FILE``). The dispatcher and the downstreams verify with a
JWKS of public keys (``INTENTLEDGER_CAPABILITY_PUBLIC_KEYS_FILE``, ``{"keys": [...]}``), several
at once while the key is rotated. Nothing has a default: a service without its keys refuses to
start, unless ``INTENTLEDGER_DEV_MODE`` says this is a local run, in which case a development
key is generated under ``<home>/identity`` (kept once made) and a warning is logged.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

from joserfc.jwk import OKPKey

from shared.capabilities import PublicKeys
from shared.config import Settings
from shared.identity.signatures import (generate_signing_key, load_signing_key,
                                        parse_signing_key, save_signing_key)

log = logging.getLogger(__name__)
DEV_KID = "policy-dev"
SIGNING_KEY_FILE = "capability-signing-key.jwk"
PUBLIC_KEYS_FILE = "capability-public-keys.jwks"
SIGNING_KEY_FILE_ENV = "INTENTLEDGER_CAPABILITY_SIGNING_KEY_FILE"
PUBLIC_KEYS_FILE_ENV = "INTENTLEDGER_CAPABILITY_PUBLIC_KEYS_FILE"


class CapabilityKeysMissing(RuntimeError):
    """A service was started without its capability keys and not in development mode."""


def signing_key(settings: Settings) -> OKPKey:
    """The policy's private key; only the policy calls this."""
    if settings.capability_signing_key is not None:
        key = parse_signing_key(settings.capability_signing_key.get_secret_value(),
                                "INTENTLEDGER_CAPABILITY_SIGNING_KEY")
    elif settings.capability_signing_key_file is not None:
        key = load_signing_key(settings.capability_signing_key_file)
    else:
        key = load_signing_key(_development_keys(settings) / SIGNING_KEY_FILE)
    if not isinstance(key, OKPKey):
        raise ValueError("the capability signing key must be an Ed25519 (OKP) JWK")
    return key


def public_keys(settings: Settings) -> PublicKeys:
    """The keys a capability may be signed with, by kid."""
    path = settings.capability_public_keys_file
    if path is None:
        path = _development_keys(settings) / PUBLIC_KEYS_FILE
    return parse_public_keys(Path(path).read_text(encoding="utf-8"), str(path))


def parse_public_keys(text: str, source: str = "the key set") -> PublicKeys:
    document = json.loads(text)
    if not isinstance(document, dict) or not isinstance(document.get("keys"), list):
        raise ValueError(f'{source}: not a JWKS ({{"keys": [...]}})')
    keys: dict[str, OKPKey] = {}
    for entry in document["keys"]:
        if not isinstance(entry, dict) or entry.get("kty") != "OKP" or not entry.get("kid"):
            raise ValueError(f"{source}: every key must be an Ed25519 (OKP) JWK with a kid")
        if "d" in entry:
            raise ValueError(f"{source}: key {entry['kid']} is private; publish public keys only")
        keys[entry["kid"]] = OKPKey.import_key(entry)
    if not keys:
        raise ValueError(f"{source}: no keys")
    return keys


def generate(private: Path, keyset: Path, kid: str) -> None:
    """A new signing key at ``private`` (never over an existing one: FileExistsError) and its
    public half added to the key set at ``keyset``, so that the previous key stays valid
    while verifiers pick up the new one; drop the old entry once nothing it signed is alive."""
    for folder in (private.parent, keyset.parent):
        folder.mkdir(parents=True, exist_ok=True)
    key = generate_signing_key(kid)
    save_signing_key(key, private)
    entries = json.loads(keyset.read_text())["keys"] if keyset.exists() else []
    entries = [entry for entry in entries if entry.get("kid") != kid] + [key.as_dict(private=False)]
    temporary = keyset.with_suffix(".tmp")
    temporary.write_text(json.dumps({"keys": entries}, indent=2))
    temporary.replace(keyset)


def local_environment(settings: Settings) -> dict[str, str]:
    """For what starts the services as processes on one machine (``make demo``, the fault
    protocols, the benchmark): the variables naming a key generated once under
    ``<home>/identity``, made before any process starts so that none of them races to make it.
    Keys the environment already names (a test session's) win: then nothing is returned."""
    if os.environ.get(SIGNING_KEY_FILE_ENV) and os.environ.get(PUBLIC_KEYS_FILE_ENV):
        return {}
    directory = _local_keys(settings.home)
    return {SIGNING_KEY_FILE_ENV: str(directory / SIGNING_KEY_FILE),
            PUBLIC_KEYS_FILE_ENV: str(directory / PUBLIC_KEYS_FILE)}


def _local_keys(home: Path) -> Path:
    directory = home / "identity"
    if not (directory / SIGNING_KEY_FILE).exists():
        generate(directory / SIGNING_KEY_FILE, directory / PUBLIC_KEYS_FILE, DEV_KID)
    return directory


def _development_keys(settings: Settings) -> Path:
    if not settings.dev_mode:
        raise CapabilityKeysMissing(
            "no capability keys: set INTENTLEDGER_CAPABILITY_SIGNING_KEY(_FILE) (policy) and "
            "INTENTLEDGER_CAPABILITY_PUBLIC_KEYS_FILE (everyone), e.g. from "
            "`intentledger keys capability`; or INTENTLEDGER_DEV_MODE=true for a local run")
    directory = _local_keys(settings.home)
    log.warning("DEVELOPMENT MODE: capabilities are signed and checked with the development "
                "key in %s; never run a deployment like this", directory)
    return directory
