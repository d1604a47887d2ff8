"""Console sessions: a cookie is believed only as signed, only until it expires and only while
its token is still configured for the same person and tenant; the CSRF token belongs to one
session; the proxy's header only when configured and for known people; nothing a client sends
makes the comparison raise."""

from __future__ import annotations

import base64
import json

import pytest
from pydantic import SecretStr, ValidationError

from services.query.console.sessions import Sessions
from services.query.console.settings import ConsoleSettings, ConsoleUser

DANA = ConsoleUser(id="operator:dana", tenant="*")
ANNA = ConsoleUser(id="ops:a", tenant="acme")
SETTINGS = ConsoleSettings(tokens={"tok-dana": DANA, "tok-acme": ANNA},
                           session_secret=SecretStr("s" * 32), session_hours=1)


def test_a_known_token_opens_a_session_the_cookie_carries():
    sessions = Sessions(SETTINGS)
    viewer, cookie = sessions.sign_in("tok-dana", now=1000.0)
    assert sessions.from_cookie(cookie, now=1001.0) == viewer
    assert viewer.access.operator and viewer.operator_id == "operator:dana"
    assert sessions.sign_in("tok-nobody") is None and sessions.sign_in("") is None
    assert sessions.sign_in("tök-dana") is None  # non-ASCII: refused, not raised


def test_a_tenant_token_sees_one_tenant():
    viewer, _ = Sessions(SETTINGS).sign_in("tok-acme")
    assert viewer.access.tenant == "acme" and not viewer.access.operator


def test_an_expired_or_altered_cookie_is_nobody():
    sessions = Sessions(SETTINGS)
    _, cookie = sessions.sign_in("tok-acme", now=1000.0)
    assert sessions.from_cookie(cookie, now=1000.0 + 3601) is None
    body, signature = cookie.rsplit(".", 1)
    claims = json.loads(base64.urlsafe_b64decode(body)) | {"tenant": "*"}  # widen the scope
    forged = base64.urlsafe_b64encode(json.dumps(claims).encode()).decode()
    assert sessions.from_cookie(f"{forged}.{signature}", now=1001.0) is None
    assert sessions.from_cookie("garbage", now=1001.0) is None
    assert sessions.from_cookie(f"{body}.é", now=1001.0) is None  # non-ASCII: refused, not raised
    other_secret = Sessions(SETTINGS.model_copy(update={"session_secret": SecretStr("t" * 32)}))
    assert other_secret.from_cookie(cookie, now=1001.0) is None


def test_a_token_taken_out_or_given_another_tenant_ends_its_sessions():
    _, cookie = Sessions(SETTINGS).sign_in("tok-acme")
    assert Sessions(SETTINGS).from_cookie(cookie) is not None  # a restart with the same tokens
    revoked = SETTINGS.model_copy(update={"tokens": {"tok-dana": DANA}})
    assert Sessions(revoked).from_cookie(cookie) is None
    moved = SETTINGS.model_copy(update={"tokens": {"tok-dana": DANA,
                                                   "tok-acme": ConsoleUser(id="ops:a", tenant="*")}})
    assert Sessions(moved).from_cookie(cookie) is None


def test_without_a_configured_secret_each_process_signs_with_its_own():
    unset = SETTINGS.model_copy(update={"session_secret": None})
    _, cookie = Sessions(unset).sign_in("tok-dana")
    assert Sessions(unset).from_cookie(cookie) is None


def test_the_csrf_token_is_of_one_session():
    sessions = Sessions(SETTINGS)
    first, _ = sessions.sign_in("tok-dana")
    second, _ = sessions.sign_in("tok-dana")
    token = sessions.csrf_token(first)
    assert sessions.csrf_valid(first, token)
    assert not sessions.csrf_valid(second, token)
    assert not sessions.csrf_valid(first, None) and not sessions.csrf_valid(first, "")
    assert not sessions.csrf_valid(first, "ä" * 64)


def test_the_proxy_header_is_believed_only_when_configured_and_for_known_people():
    proxied = ConsoleSettings(identity_header="X-Forwarded-Email", port=0,
                              identities={"dana@example.com": "*"})
    viewer = Sessions(proxied).from_proxy("dana@example.com")
    assert viewer is not None and viewer.operator_id == "dana@example.com" and viewer.access.operator
    assert Sessions(proxied).from_proxy("mallory@example.com") is None
    assert Sessions(proxied).from_proxy(None) is None
    assert Sessions(SETTINGS).from_proxy("dana@example.com") is None  # no header configured


def test_the_proxy_header_needs_the_consoles_own_port():
    with pytest.raises(ValidationError, match="INTENTLEDGER_CONSOLE_PORT"):
        ConsoleSettings(identity_header="X-Forwarded-Email")
