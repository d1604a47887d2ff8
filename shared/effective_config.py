"""The configuration a process really runs with, as one JSON object for its start-up log line:
the first thing to read when a deployment misbehaves.

Keyed by the environment variable that sets each value, so the line says what to change. No
secret is shown: ``SecretStr`` values and fields declared ``repr=False`` (API keys) are masked,
and so is the password in any URL (``postgresql://user:<masked>@host/db?sslmode=verify-full``;
the rest of the URL, TLS parameters included, is shown as the process uses it).
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from pydantic import SecretStr
from pydantic_settings import BaseSettings

MASK = "**********"
_QUERY_SECRET = re.compile(r"(?i)([?&](?:password|sslpassword)=)[^&#]*")


def effective(*settings: BaseSettings) -> dict[str, Any]:
    shown: dict[str, Any] = {}
    for instance in settings:
        prefix = instance.model_config.get("env_prefix", "")
        dumped = instance.model_dump(mode="json")
        for name, field in type(instance).model_fields.items():
            alias = field.validation_alias
            key = alias if isinstance(alias, str) else f"{prefix}{name}".upper()
            value = getattr(instance, name)
            secret = isinstance(value, SecretStr) or not field.repr
            shown[key] = (MASK if _present(value) else dumped[name]) if secret else _masked(dumped[name])
    return shown


def masked_url(url: str) -> str:
    """``url`` without its password; anything that is not a URL with credentials unchanged."""
    parts = urlsplit(url)
    userinfo, at, host = parts.netloc.rpartition("@")
    if at and ":" in userinfo:
        url = urlunsplit(parts._replace(netloc=f"{userinfo.split(':', 1)[0]}:{MASK}@{host}"))
    return _QUERY_SECRET.sub(rf"\g<1>{MASK}", url)


def _present(value: Any) -> bool:
    return bool(value.get_secret_value() if isinstance(value, SecretStr) else value)


def _masked(value: Any) -> Any:
    if isinstance(value, str):
        return masked_url(value) if "://" in value or "password=" in value.lower() else value
    if isinstance(value, dict):
        return {key: _masked(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_masked(item) for item in value]
    return value
