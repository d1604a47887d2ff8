"""``intentledger keys generate``: the private key goes to a file only its owner reads, never
over an existing one; what it prints is the entry the principals file needs, and a record
signed with the file's key verifies with it."""

from __future__ import annotations

import stat

import pytest
import yaml

from intentledger.cli import main
from shared.identity.principals import Principals
from shared.identity.signatures import load_signing_key, sign, verify


@pytest.mark.parametrize("curve", ["Ed25519", "P-256"])
def test_a_generated_key_signs_what_its_printed_entry_verifies(tmp_path, capsys, curve):
    out = tmp_path / "agent-7.jwk"
    assert main(["keys", "generate", "--kid", "agent-7-a", "--curve", curve, "--out", str(out)]) == 0
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
    entry = yaml.safe_load(capsys.readouterr().out)
    assert "d" not in entry[0]["jwk"]
    principals = Principals.model_validate({"principals": [
        {"id": "agent-7", "kind": "agent", "tenants": ["acme"], "keys": entry}]})
    token = sign(b'{"run_id": "r"}', load_signing_key(out), principal_id="agent-7",
                 tenant_id="acme")
    assert verify(b'{"run_id": "r"}', token, principals).kid == "agent-7-a"


def test_an_existing_key_file_is_never_overwritten(tmp_path, capsys):
    out = tmp_path / "key.jwk"
    out.write_text("mine")
    assert main(["keys", "generate", "--kid", "k", "--out", str(out)]) == 1
    assert out.read_text() == "mine"
    assert "never overwritten" in capsys.readouterr().err


def test_a_public_key_cannot_sign(tmp_path):
    public = tmp_path / "public.jwk"
    public.write_text('{"kty": "OKP", "crv": "Ed25519", "x": "r3dmZW-GXLCZ-VxKBd_iihMVVgSsxkkeqta4p6dFwCY"}')
    with pytest.raises(ValueError, match="private JWK"):
        load_signing_key(public)
