"""How every Kafka client of the code base authenticates and encrypts: one place, so no client
can be left on PLAINTEXT in a cluster that requires TLS and SCRAM (Strimzi's ``tls`` listener).

``INTENTLEDGER_KAFKA_SECURITY_PROTOCOL`` is ``PLAINTEXT`` (the default: the local broker of
``infra up``, compose), ``SSL`` (TLS; with a client certificate and key, mutual TLS),
``SASL_SSL`` or ``SASL_PLAINTEXT`` (a SASL login: SCRAM-SHA-512 by default). aiokafka producers,
consumers and admin clients take ``client_options``; FastStream brokers come from ``new_broker``
(the same settings as FastStream's security object). A setting that the chosen
protocol would ignore is refused at start rather than silently connecting unauthenticated.
"""

from __future__ import annotations

import ssl
from functools import cache, cached_property
from pathlib import Path
from typing import Any, Literal

from aiokafka.helpers import create_ssl_context
from faststream.kafka import KafkaBroker
from faststream.security import BaseSecurity, SASLPlaintext, SASLScram256, SASLScram512
from pydantic import SecretStr, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

_SASL = {"SCRAM-SHA-512": SASLScram512, "SCRAM-SHA-256": SASLScram256, "PLAIN": SASLPlaintext}


class KafkaSecurity(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="INTENTLEDGER_KAFKA_", extra="ignore")

    security_protocol: Literal["PLAINTEXT", "SSL", "SASL_SSL", "SASL_PLAINTEXT"] = "PLAINTEXT"
    sasl_mechanism: Literal["SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN"] = "SCRAM-SHA-512"
    sasl_username: str | None = None
    sasl_password: SecretStr | None = None
    ssl_cafile: Path | None = None
    """The CA that signed the brokers' certificates (Strimzi's cluster CA); unset: the system's."""
    ssl_certfile: Path | None = None
    """A client certificate (PEM) for mutual TLS; with ``ssl_keyfile`` unless it holds the key."""
    ssl_keyfile: Path | None = None

    @model_validator(mode="after")
    def _consistent(self) -> KafkaSecurity:
        protocol = f"INTENTLEDGER_KAFKA_SECURITY_PROTOCOL={self.security_protocol}"
        if self.sasl:
            for name, value in (("USERNAME", self.sasl_username), ("PASSWORD", self.sasl_password)):
                if not value or (isinstance(value, SecretStr) and not value.get_secret_value()):
                    raise ValueError(f"{protocol} needs INTENTLEDGER_KAFKA_SASL_{name}")
        elif self.sasl_username or self.sasl_password:
            raise ValueError(f"INTENTLEDGER_KAFKA_SASL_USERNAME/_PASSWORD are set but {protocol} "
                             "does not log in: use SASL_SSL")
        tls_files = [f for f in ("ssl_cafile", "ssl_certfile", "ssl_keyfile") if getattr(self, f)]
        if tls_files and not self.tls:
            raise ValueError(f"INTENTLEDGER_KAFKA_{tls_files[0].upper()} is set but {protocol} "
                             "does not use TLS: use SSL or SASL_SSL")
        if self.ssl_keyfile and not self.ssl_certfile:
            raise ValueError("INTENTLEDGER_KAFKA_SSL_KEYFILE needs INTENTLEDGER_KAFKA_SSL_CERTFILE")
        return self

    @property
    def sasl(self) -> bool:
        return self.security_protocol.startswith("SASL_")

    @property
    def tls(self) -> bool:
        return self.security_protocol in ("SSL", "SASL_SSL")

    @cached_property
    def ssl_context(self) -> ssl.SSLContext | None:
        """Verifies the brokers' certificates and host names; None without TLS."""
        if not self.tls:
            return None
        return create_ssl_context(cafile=self.ssl_cafile, certfile=self.ssl_certfile,
                                  keyfile=self.ssl_keyfile)

    def client_kwargs(self) -> dict[str, Any]:
        """Keyword arguments of ``AIOKafkaProducer``, ``AIOKafkaConsumer``, ``AIOKafkaAdminClient``."""
        kwargs: dict[str, Any] = {"security_protocol": self.security_protocol}
        if self.tls:
            kwargs["ssl_context"] = self.ssl_context
        if self.sasl:
            assert self.sasl_password is not None  # the validator saw to it
            kwargs.update(sasl_mechanism=self.sasl_mechanism,
                          sasl_plain_username=self.sasl_username,
                          sasl_plain_password=self.sasl_password.get_secret_value())
        return kwargs

    def broker_security(self) -> BaseSecurity | None:
        """The same, as FastStream's ``KafkaBroker(security=...)`` wants it."""
        if self.sasl:
            assert self.sasl_username is not None and self.sasl_password is not None
            return _SASL[self.sasl_mechanism](self.sasl_username,
                                              self.sasl_password.get_secret_value(),
                                              ssl_context=self.ssl_context, use_ssl=self.tls)
        if self.tls:
            return BaseSecurity(ssl_context=self.ssl_context, use_ssl=True)
        return None


@cache
def configured() -> KafkaSecurity:
    """This process's settings, read from the environment once."""
    return KafkaSecurity()


def client_options(bootstrap: str) -> dict[str, Any]:
    """``bootstrap_servers`` and the security settings of any aiokafka client."""
    return {"bootstrap_servers": bootstrap, **configured().client_kwargs()}


def new_broker(bootstrap: str, **options: Any) -> KafkaBroker:
    """A FastStream broker with this process's security settings."""
    return KafkaBroker(bootstrap, security=configured().broker_security(), **options)
