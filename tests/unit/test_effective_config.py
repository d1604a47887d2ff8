"""The effective configuration a service logs at start: every setting under the variable that
sets it, and never a secret. PostgreSQL's TLS parameters (``sslmode=verify-full``) stay in the
URL as given, from the environment to asyncpg."""

from __future__ import annotations

import json

import pytest
from pydantic import SecretStr

from services.query.settings import QuerySettings
from downstreams.wallet.settings import WalletSettings
from shared.config import Settings
from shared.db import pool as pools
from shared.effective_config import MASK, effective, masked_url
from shared.messaging.kafka_security import KafkaSecurity
from shared.telemetry import TelemetrySettings

TLS_URL = ("postgresql://dispatcher:pa%40ss@intentledger-pg-rw:5432/intentledger"
           "?sslmode=verify-full&sslrootcert=/etc/intentledger/pg-ca/ca.crt")


def test_settings_are_keyed_by_the_variable_that_sets_them():
    shown = effective(WalletSettings(http_port=8085), TelemetrySettings())
    assert shown["INTENTLEDGER_WALLET_HTTP_PORT"] == 8085
    assert shown["INTENTLEDGER_WALLET_REQUEST_TOPIC"] == "effects.wallet"
    assert shown["INTENTLEDGER_OTLP"] is False
    assert shown["OTEL_EXPORTER_OTLP_ENDPOINT"] == "http://localhost:4317"  # a standard name


def test_no_secret_reaches_the_line():
    secrets = ["capability-key-123", "kafka-password-456", "operator-api-key-789", "pa%40ss"]
    settings = (Settings(capability_signing_key=SecretStr(secrets[0]), database_url=TLS_URL),
                KafkaSecurity(security_protocol="SASL_SSL", sasl_username="intentledger-query",
                              sasl_password=SecretStr(secrets[1])),
                QuerySettings(api_keys={secrets[2]: "*"}))
    line = json.dumps(effective(*settings))
    assert not [secret for secret in secrets if secret in line]
    shown = effective(*settings)
    assert shown["INTENTLEDGER_CAPABILITY_SIGNING_KEY"] == MASK
    assert shown["INTENTLEDGER_KAFKA_SASL_PASSWORD"] == MASK
    assert shown["INTENTLEDGER_QUERY_API_KEYS"] == MASK  # declared repr=False: keys are secrets
    assert shown["INTENTLEDGER_KAFKA_SASL_USERNAME"] == "intentledger-query"


def test_unset_secrets_show_as_unset():
    shown = effective(KafkaSecurity(), QuerySettings())
    assert shown["INTENTLEDGER_KAFKA_SASL_PASSWORD"] is None
    assert shown["INTENTLEDGER_QUERY_API_KEYS"] == {}  # no keys: every request refused


@pytest.mark.parametrize("url, shown", [
    (TLS_URL, TLS_URL.replace("pa%40ss", MASK)),
    ("postgresql://postgres@127.0.0.1:55432/intentledger", "postgresql://postgres@127.0.0.1:55432/intentledger"),
    ("postgresql://h/db?user=u&password=x&sslmode=require", f"postgresql://h/db?user=u&password={MASK}&sslmode=require"),
    ("kafka:9092", "kafka:9092"),
])
def test_url_passwords_are_masked_and_the_rest_kept(url, shown):
    assert masked_url(url) == shown


async def test_a_database_url_with_sslmode_reaches_asyncpg_untouched(monkeypatch):
    assert Settings(database_url=TLS_URL, kafka_bootstrap="kafka:9093").endpoints.database_url == TLS_URL
    given = {}

    async def create_pool(dsn, **options):
        given["dsn"] = dsn

    monkeypatch.setattr(pools.asyncpg, "create_pool", create_pool)
    await pools.open_pool(TLS_URL, application_name="intentledger-test")
    assert given["dsn"] == TLS_URL


async def test_asyncpg_applies_the_url_s_tls_parameters():
    """verify-full needs the CA file before anything is sent; without TLS the same URL simply
    finds nobody listening."""
    url = "postgresql://u:p@127.0.0.1:9/db?sslrootcert=/nonexistent/ca.crt&sslmode="
    with pytest.raises(FileNotFoundError):
        await pools.open_pool(url + "verify-full", application_name="intentledger-test")
    with pytest.raises(ConnectionRefusedError):
        await pools.open_pool(url + "disable", application_name="intentledger-test")
