"""Where capability keys come from: configured, or generated for a local run that says it is
one; never a silent default."""

from __future__ import annotations

import json
import logging

import pytest
from pydantic import SecretStr

from shared.config import Settings
from shared.identity import capability_keys
from shared.identity.capability_keys import CapabilityKeysMissing, generate, parse_public_keys

BARE = {"capability_signing_key": None, "capability_signing_key_file": None,
        "capability_public_keys_file": None}


def test_without_keys_and_without_dev_mode_no_service_starts(tmp_path):
    settings = Settings(home=tmp_path, dev_mode=False, **BARE)
    with pytest.raises(CapabilityKeysMissing, match="INTENTLEDGER_DEV_MODE"):
        capability_keys.signing_key(settings)
    with pytest.raises(CapabilityKeysMissing):
        capability_keys.public_keys(settings)
    assert not (tmp_path / "identity").exists()


def test_dev_mode_generates_one_key_under_home_and_says_so_loudly(tmp_path, caplog):
    settings = Settings(home=tmp_path, dev_mode=True, **BARE)
    with caplog.at_level(logging.WARNING):
        key = capability_keys.signing_key(settings)
        assert set(capability_keys.public_keys(settings)) == {key.kid}
    assert capability_keys.signing_key(settings).kid == key.kid  # kept once made
    assert "DEVELOPMENT MODE" in caplog.text


def test_configured_keys_win_and_rotation_keeps_the_old_key_valid(tmp_path):
    keyset = tmp_path / "public" / "keys.jwks"
    generate(tmp_path / "old.jwk", keyset, "policy-1")
    private = tmp_path / "new.jwk"
    generate(private, keyset, "policy-2")
    with pytest.raises(FileExistsError):  # a key is never overwritten
        generate(private, keyset, "policy-3")
    settings = Settings(home=tmp_path, capability_signing_key=SecretStr(private.read_text()),
                        capability_public_keys_file=keyset)
    assert capability_keys.signing_key(settings).kid == "policy-2"
    assert set(capability_keys.public_keys(settings)) == {"policy-1", "policy-2"}


@pytest.mark.parametrize("document", [{"keys": []}, {"kid": "x"}, {"keys": [{"kty": "OKP"}]}])
def test_a_key_set_is_a_jwks_of_kid_named_ed25519_keys(document):
    with pytest.raises(ValueError):
        parse_public_keys(json.dumps(document))


def test_a_private_key_in_the_public_set_is_refused(tmp_path):
    private = tmp_path / "policy.jwk"
    generate(private, tmp_path / "keys.jwks", "policy-1")
    with pytest.raises(ValueError, match="private"):
        parse_public_keys(json.dumps({"keys": [json.loads(private.read_text())]}))


def test_what_starts_local_processes_makes_the_key_once_before_they_start(tmp_path, monkeypatch):
    for name in (capability_keys.SIGNING_KEY_FILE_ENV, capability_keys.PUBLIC_KEYS_FILE_ENV):
        monkeypatch.delenv(name, raising=False)
    env = capability_keys.local_environment(Settings(home=tmp_path))
    assert capability_keys.local_environment(Settings(home=tmp_path)) == env  # kept once made
    named = Settings(home=tmp_path, dev_mode=False, capability_signing_key=None,
                     capability_signing_key_file=env[capability_keys.SIGNING_KEY_FILE_ENV],
                     capability_public_keys_file=env[capability_keys.PUBLIC_KEYS_FILE_ENV])
    assert set(capability_keys.public_keys(named)) == {capability_keys.signing_key(named).kid}
    monkeypatch.setenv(capability_keys.SIGNING_KEY_FILE_ENV, "/session/policy.jwk")
    monkeypatch.setenv(capability_keys.PUBLIC_KEYS_FILE_ENV, "/session/keys.jwks")
    assert capability_keys.local_environment(Settings(home=tmp_path)) == {}  # the session's win
