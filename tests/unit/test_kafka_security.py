"""Kafka security settings → client arguments: what the environment says reaches aiokafka and
FastStream alike, inconsistent settings are refused at start, and no client of the code is
created without them."""

from __future__ import annotations

import re
import ssl
import subprocess
from pathlib import Path

import pytest
from faststream.kafka.security import parse_security
from faststream.security import BaseSecurity, SASLScram512
from pydantic import ValidationError

from shared.messaging.kafka_security import KafkaSecurity
from tests.support.deployment import ROOT

CONTRACT_ENV = ("INTENTLEDGER_KAFKA_SECURITY_PROTOCOL", "INTENTLEDGER_KAFKA_SASL_MECHANISM",
                "INTENTLEDGER_KAFKA_SASL_USERNAME", "INTENTLEDGER_KAFKA_SASL_PASSWORD",
                "INTENTLEDGER_KAFKA_SSL_CAFILE", "INTENTLEDGER_KAFKA_SSL_CERTFILE",
                "INTENTLEDGER_KAFKA_SSL_KEYFILE")


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    for name in CONTRACT_ENV:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(scope="module")
def pem(tmp_path_factory) -> tuple[Path, Path]:
    """A self-signed certificate and its key: a CA file, or a client's certificate."""
    folder = tmp_path_factory.mktemp("tls")
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:prime256v1", "-nodes", "-days", "1", "-subj", "/CN=test",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
    return cert, key


def test_plaintext_is_the_default_and_adds_nothing():
    security = KafkaSecurity()
    assert security.client_kwargs() == {"security_protocol": "PLAINTEXT"}
    assert security.broker_security() is None


def test_the_contract_variables_become_a_scram_login_over_verified_tls(monkeypatch, pem):
    cafile, _ = pem
    for name, value in {"SECURITY_PROTOCOL": "SASL_SSL", "SASL_MECHANISM": "SCRAM-SHA-512",
                        "SASL_USERNAME": "intentledger-relay", "SASL_PASSWORD": "s3cret",
                        "SSL_CAFILE": str(cafile)}.items():
        monkeypatch.setenv(f"INTENTLEDGER_KAFKA_{name}", value)
    security = KafkaSecurity()
    kwargs = security.client_kwargs()
    context = kwargs.pop("ssl_context")
    assert kwargs == {"security_protocol": "SASL_SSL", "sasl_mechanism": "SCRAM-SHA-512",
                      "sasl_plain_username": "intentledger-relay", "sasl_plain_password": "s3cret"}
    assert isinstance(context, ssl.SSLContext)
    assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname
    assert "s3cret" not in repr(security)
    broker = security.broker_security()
    assert isinstance(broker, SASLScram512)
    assert parse_security(broker) == security.client_kwargs()  # FastStream's clients get the same


def test_ssl_with_a_client_certificate_is_mutual_tls(pem):
    cert, key = pem
    security = KafkaSecurity(security_protocol="SSL", ssl_cafile=cert, ssl_certfile=cert,
                             ssl_keyfile=key)
    assert set(security.client_kwargs()) == {"security_protocol", "ssl_context"}
    broker = security.broker_security()
    assert type(broker) is BaseSecurity and broker.use_ssl
    assert parse_security(broker) == security.client_kwargs()


@pytest.mark.parametrize("settings, refusal", [
    ({"security_protocol": "SASL_SSL", "sasl_username": "u"},
     "INTENTLEDGER_KAFKA_SECURITY_PROTOCOL=SASL_SSL needs INTENTLEDGER_KAFKA_SASL_PASSWORD"),
    ({"security_protocol": "SASL_SSL", "sasl_username": "u", "sasl_password": ""},
     "needs INTENTLEDGER_KAFKA_SASL_PASSWORD"),
    ({"security_protocol": "SASL_PLAINTEXT", "sasl_password": "p"},
     "needs INTENTLEDGER_KAFKA_SASL_USERNAME"),
    ({"sasl_username": "u", "sasl_password": "p"}, "=PLAINTEXT does not log in"),
    ({"ssl_cafile": "/ca.crt"}, "INTENTLEDGER_KAFKA_SSL_CAFILE is set but"),
    ({"security_protocol": "SSL", "ssl_keyfile": "/k.pem"}, "needs INTENTLEDGER_KAFKA_SSL_CERTFILE"),
])
def test_settings_the_protocol_would_ignore_or_miss_are_refused_clearly(settings, refusal):
    with pytest.raises(ValidationError, match=re.escape(refusal)):
        KafkaSecurity(**settings)


def test_a_sasl_login_without_a_password_is_refused_from_the_environment(monkeypatch):
    monkeypatch.setenv("INTENTLEDGER_KAFKA_SECURITY_PROTOCOL", "SASL_SSL")
    monkeypatch.setenv("INTENTLEDGER_KAFKA_SASL_USERNAME", "intentledger-policy")
    with pytest.raises(ValidationError, match="needs INTENTLEDGER_KAFKA_SASL_PASSWORD"):
        KafkaSecurity()


CLIENT = re.compile(r"\b(AIOKafkaProducer|AIOKafkaConsumer|AIOKafkaAdminClient|KafkaBroker)\(")
NOT_SECURED = {
    "shared/infra/readiness.py": "probes the broker `infra up` started (plain, or as its admin)",
}


def test_every_kafka_client_the_code_creates_takes_the_security_settings():
    unsecured = []
    for path in [*ROOT.joinpath("services").rglob("*.py"), *ROOT.joinpath("shared").rglob("*.py")]:
        relative = str(path.relative_to(ROOT))
        if relative in NOT_SECURED or relative == "shared/messaging/kafka_security.py":
            continue
        source = path.read_text("utf-8")
        for match in CLIENT.finditer(source):
            if "client_options(" not in _arguments(source, match.end()):
                unsecured.append(f"{relative}: {match.group(0)}")
    assert unsecured == []


def _arguments(source: str, start: int) -> str:
    """The text of a call's arguments, up to its closing parenthesis."""
    depth, end = 1, start
    while depth:
        depth += {"(": 1, ")": -1}.get(source[end], 0)
        end += 1
    return source[start:end]
