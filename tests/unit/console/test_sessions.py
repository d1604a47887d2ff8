"""Console sessions: a cookie is believed only as signed and only until it expires; the CSRF
token belongs to one session; the proxy's header only when configured and for known people."""

from __future__ import annotations

import base64
import json

from pydantic import SecretStr

from services.console.sessions import Sessions
from services.console.settings import ConsoleSettings, ConsoleUser

DANA = ConsoleUser(id="operator:dana", tenant="*")
SETTINGS = ConsoleSettings(tokens={"tok-dana": DANA, "tok-acme": ConsoleUser(id="ops:a", tenant="acme")},
                           session_secret=SecretStr("s" * 32), session_hours=1)


def test_a_known_token_opens_a_session_the_cookie_carries():
    sessions = Sessions(SETTINGS)
    assert sessions.user_for_token("tok-dana") == DANA
    assert sessions.user_for_token("tok-nobody") is None and sessions.user_for_token("") is None
    viewer, cookie = sessions.open(DANA, now=1000.0)
    assert sessions.from_cookie(cookie, now=1001.0) == viewer
    assert viewer.access.operator and viewer.operator_id == "operator:dana"


def test_a_tenant_token_sees_one_tenant():
    sessions = Sessions(SETTINGS)
    viewer, _ = sessions.open(sessions.user_for_token("tok-acme"))
    assert viewer.access.tenant == "acme" and not viewer.access.operator


def test_an_expired_or_altered_cookie_is_nobody():
    sessions = Sessions(SETTINGS)
    viewer, cookie = sessions.open(ConsoleUser(id="ops:a", tenant="acme"), now=1000.0)
    assert sessions.from_cookie(cookie, now=1000.0 + 3601) is None
    body, signature = cookie.rsplit(".", 1)
    claims = json.loads(base64.urlsafe_b64decode(body)) | {"tenant": "*"}  # widen the scope
    forged = base64.urlsafe_b64encode(json.dumps(claims).encode()).decode()
    assert sessions.from_cookie(f"{forged}.{signature}", now=1001.0) is None
    assert sessions.from_cookie("garbage", now=1001.0) is None
    other_secret = Sessions(SETTINGS.model_copy(update={"session_secret": SecretStr("t" * 32)}))
    assert other_secret.from_cookie(cookie, now=1001.0) is None


def test_without_a_configured_secret_each_process_signs_with_its_own():
    unset = SETTINGS.model_copy(update={"session_secret": None})
    _, cookie = Sessions(unset).open(DANA)
    assert Sessions(unset).from_cookie(cookie) is None


def test_the_csrf_token_is_of_one_session():
    sessions = Sessions(SETTINGS)
    first, _ = sessions.open(DANA)
    second, _ = sessions.open(DANA)
    token = sessions.csrf_token(first)
    assert sessions.csrf_valid(first, token)
    assert not sessions.csrf_valid(second, token)
    assert not sessions.csrf_valid(first, None) and not sessions.csrf_valid(first, "")


def test_the_proxy_header_is_believed_only_when_configured_and_for_known_people():
    proxied = SETTINGS.model_copy(update={"identity_header": "X-Forwarded-Email",
                                          "identities": {"dana@example.com": "*"}})
    viewer = Sessions(proxied).from_proxy("dana@example.com")
    assert viewer is not None and viewer.operator_id == "dana@example.com" and viewer.access.operator
    assert Sessions(proxied).from_proxy("mallory@example.com") is None
    assert Sessions(proxied).from_proxy(None) is None
    assert Sessions(SETTINGS).from_proxy("dana@example.com") is None  # no header configured
