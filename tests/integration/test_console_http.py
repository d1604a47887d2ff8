"""The operator console's HTTP side on real PostgreSQL and Kafka: signing in, the session
reading the query API with the same tenant scoping as an API key, live counts and the health
report, the resolve form's guards (CSRF token, origin, tenant), and the security headers on
every answer. The browser itself is driven in tests/browser/."""

from __future__ import annotations

import uuid
from contextlib import asynccontextmanager
from datetime import UTC, datetime

import aiohttp
import pytest

from services.query.console.settings import ConsoleSettings, ConsoleUser
from services.query.console.web import CONTENT_SECURITY_POLICY
from shared.db.schemas import migrate_service
from tests.support.kafka import create_topic, read_topic, unique_topic
from tests.support.query_api import query_api
from tests.support.query_rows import seed_call, seed_event, seed_run, unique

pytestmark = pytest.mark.infra

TENANT_A, TENANT_B = unique("acme"), unique("globex")
OPERATOR_TOKEN, TENANT_TOKEN = unique("tok-ops"), unique("tok-a")
CONSOLE = ConsoleSettings(tokens={OPERATOR_TOKEN: ConsoleUser(id="operator:dana", tenant="*"),
                                  TENANT_TOKEN: ConsoleUser(id="ops:acme-anna", tenant=TENANT_A)})
RESOLUTIONS = unique_topic("console-resolutions")


@pytest.fixture(scope="module")
async def api(pool, endpoints):
    await migrate_service(pool, "projection")
    await create_topic(endpoints.kafka_bootstrap, RESOLUTIONS)
    async with query_api(endpoints, {}, console=CONSOLE, resolutions_topic=RESOLUTIONS) as client:
        yield client


def cookie_jar(url: str) -> aiohttp.CookieJar:
    """Cookies as a browser keeps them for a loopback address: an IP host is allowed, and the
    console's cookie is `Secure`, which browsers honour on http://127.0.0.1 (a secure context)."""
    return aiohttp.CookieJar(unsafe=True, treat_as_secure_origin=url)


@asynccontextmanager
async def browser_session(api, token: str | None):
    """A client that keeps cookies like a browser, signed in with ``token``."""
    async with aiohttp.ClientSession(cookie_jar=cookie_jar(api.url)) as session:
        if token is not None:
            async with session.post(f"{api.url}/console/session", json={"token": token}) as answer:
                assert answer.status == 200, await answer.text()
        yield session


async def get(session, api, path: str, **params) -> tuple[int, dict]:
    async with session.get(f"{api.url}{path}", params=params) as answer:
        return answer.status, await answer.json()


async def test_a_token_signs_in_with_a_strict_http_only_secure_cookie(api):
    async with aiohttp.ClientSession(cookie_jar=cookie_jar(api.url)) as session:
        async with session.post(f"{api.url}/console/session", json={"token": "not-a-token"}) as answer:
            assert (answer.status, (await answer.json())["error"]["code"]) == (401, "unauthenticated")
        async with session.get(f"{api.url}/console/api/me") as answer:
            assert answer.status == 401
        async with session.post(f"{api.url}/console/session", json={"token": OPERATOR_TOKEN}) as answer:
            assert answer.status == 200
            cookie = answer.headers["Set-Cookie"]
        assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Path=/" in cookie
        assert "Secure" in cookie
        status, me = await get(session, api, "/console/api/me")
        assert status == 200 and (me["operator_id"], me["tenant"]) == ("operator:dana", "*")
        assert len(me["csrf_token"]) == 64
        # Signing out deletes the browser's cookie (sessions are not stored: a token taken out
        # of the configuration ends its sessions, tests/unit/console/test_sessions.py).
        async with session.post(f"{api.url}/console/session/end", json={}) as answer:
            assert answer.status == 403  # without the CSRF token, not even this
        async with session.post(f"{api.url}/console/session/end", json={},
                                headers={"X-CSRF-Token": me["csrf_token"]}) as answer:
            assert answer.status == 200
        assert (await get(session, api, "/console/api/me"))[0] == 401


async def test_a_session_reads_the_api_with_the_same_tenant_scoping_as_a_key(pool, api):
    principal = unique("agent")
    mine = await seed_run(pool, TENANT_A, principal=principal)
    theirs = await seed_run(pool, TENANT_B, principal=principal)
    their_call = await seed_call(pool, theirs)
    async with browser_session(api, TENANT_TOKEN) as session:
        status, page = await get(session, api, "/v1/runs", principal=principal)
        assert status == 200 and [run["run_id"] for run in page["items"]] == [mine.run_id]
        assert (await get(session, api, f"/v1/calls/{their_call}"))[0] == 404
        status, body = await get(session, api, "/v1/health")
        assert (status, body["error"]["code"]) == (403, "operator_only")
    async with browser_session(api, OPERATOR_TOKEN) as session:
        status, page = await get(session, api, "/v1/runs", principal=principal)
        assert sorted(run["run_id"] for run in page["items"]) == sorted([mine.run_id, theirs.run_id])
    async with browser_session(api, None) as session:
        assert (await get(session, api, "/v1/runs"))[0] == 401


async def test_counts_are_per_state_within_the_viewers_tenant(pool, api, endpoints):
    tenant = unique("initech")
    console = ConsoleSettings(tokens={"t": ConsoleUser(id="ops:i", tenant=tenant)})
    completed, stuck = (await seed_run(pool, tenant, status="completed"),
                        await seed_run(pool, tenant, status="needs_attention"))
    await seed_call(pool, completed, state="SUCCEEDED")
    await seed_call(pool, stuck, state="SUCCEEDED")
    await seed_call(pool, stuck, state="MANUAL_REVIEW")
    await seed_run(pool, TENANT_B, status="completed")
    async with query_api(endpoints, {}, console=console) as own, browser_session(own, "t") as session:
        status, counts = await get(session, own, "/v1/counts")
    assert status == 200
    assert counts == {"runs": {"completed": 1, "needs_attention": 1},
                      "calls": {"SUCCEEDED": 2, "MANUAL_REVIEW": 1}}


async def test_the_health_report_has_the_sampled_positions_and_the_history_rates(pool, api):
    outbox = unique("outbox")
    now = datetime.now(UTC).replace(microsecond=0)
    await pool.execute(
        "INSERT INTO projection.health_samples (metric, subject, bucket, value) VALUES "
        "('relay_backlog', $1, $2::timestamptz - interval '60 seconds', 40), "
        "('relay_backlog', $1, $2, 5)",
        outbox, now)

    async def report() -> dict:
        async with browser_session(api, OPERATOR_TOKEN) as session:
            status, body = await get(session, api, "/v1/health")
        assert status == 200, body
        return body

    def value(body: dict, name: str, subject: str) -> float:
        series = [s for s in body["series"] if (s["name"], s["subject"]) == (name, subject)]
        return series[0]["points"][-1]["value"] if series else 0.0

    before = await report()
    run = await seed_run(pool, TENANT_A)
    call = await seed_call(pool, run, state="COMPENSATED")
    for event_type, payload in (("DuplicateProposal", {}), ("DuplicateProposal", {}),
                                ("ToolEffectReconciled", {}),
                                ("CompensationSettled", {"state": "COMPENSATED"})):
        await seed_event(pool, run, event_type, call=call, payload=payload)
    after = await report()
    try:
        [backlog] = [s for s in after["series"] if s["subject"] == outbox]
        assert (backlog["name"], backlog["unit"]) == ("relay_backlog", "rows")
        assert [point["value"] for point in backlog["points"]] == [40.0, 5.0]
        assert (after["window_s"], after["bucket_s"]) == (3600, 300)
        for name, subject, added in (("duplicates_prevented", "DuplicateProposal", 2),
                                     ("duplicates_prevented", "ToolEffectReconciled", 1),
                                     ("compensations", "COMPENSATED", 1)):
            grew = value(after, name, subject) - value(before, name, subject)
            # a bucket boundary between the two reports starts the series again at `added`
            assert grew == added or value(after, name, subject) == added, (name, subject)
    finally:
        await pool.execute("DELETE FROM projection.health_samples WHERE subject = $1", outbox)


async def test_the_resolve_form_needs_the_sessions_csrf_token_its_origin_and_a_visible_call(
        pool, api, endpoints):
    theirs = await seed_run(pool, TENANT_B)
    their_call = await seed_call(pool, theirs, state="MANUAL_REVIEW", unknown_for=60)
    mine = await seed_run(pool, TENANT_A)
    my_call = await seed_call(pool, mine, state="MANUAL_REVIEW", unknown_for=60)
    form = {"outcome": "failed", "reason": "the wallet shows no debit", "evidence": "statement 7"}
    async with browser_session(api, TENANT_TOKEN) as session:
        _, me = await get(session, api, "/console/api/me")
        csrf = {"X-CSRF-Token": me["csrf_token"]}

        async def post(call, body=form, headers=csrf) -> tuple[int, str]:
            async with session.post(f"{api.url}/console/api/calls/{call}/resolution", json=body,
                                    headers=headers) as answer:
                return answer.status, (await answer.json())["error"]["code"]

        assert await post(my_call, headers={}) == (403, "csrf")
        assert await post(my_call, headers={"X-CSRF-Token": "0" * 64}) == (403, "csrf")
        assert await post(my_call, headers={**csrf, "Origin": "https://evil.example"}) == (
            403, "cross_origin")
        assert await post(their_call) == (404, "not_found")
        assert await post(uuid.uuid4()) == (404, "not_found")
        assert await post(my_call, body={**form, "outcome": "maybe"}) == (400, "invalid_body")
        assert await post(my_call, body={**form, "operator_id": "someone-else"}) == (400, "invalid_body")
    assert await read_topic(endpoints.kafka_bootstrap, RESOLUTIONS, until=1, timeout=3) == []


async def test_every_console_answer_carries_the_security_headers(api):
    async with aiohttp.ClientSession() as session:
        for path, status in (("/console/", 200), ("/console/static/console.js", 200),
                             ("/console/static/console.css", 200), ("/console/api/me", 401),
                             ("/console/static/secrets.txt", 404)):
            async with session.get(f"{api.url}{path}") as answer:
                assert answer.status == status, path
                assert answer.headers["Content-Security-Policy"] == CONTENT_SECURITY_POLICY, path
                assert answer.headers["X-Content-Type-Options"] == "nosniff", path
                assert answer.headers["X-Frame-Options"] == "DENY", path
        async with session.get(f"{api.url}/console/static/console.js") as answer:
            assert answer.headers["Content-Type"].startswith("text/javascript")
    assert "script-src 'self'" in CONTENT_SECURITY_POLICY and "unsafe" not in CONTENT_SECURITY_POLICY


async def test_behind_an_oidc_proxy_the_header_is_believed_on_the_consoles_port_only(
        pool, endpoints):
    proxied = ConsoleSettings(identity_header="X-Forwarded-Email", port=0,
                              identities={"anna@acme.example": TENANT_A},
                              tokens={OPERATOR_TOKEN: ConsoleUser(id="operator:dana", tenant="*")})
    principal = unique("agent")
    mine = await seed_run(pool, TENANT_A, principal=principal)
    await seed_run(pool, TENANT_B, principal=principal)
    anna = {"X-Forwarded-Email": "anna@acme.example"}
    async with query_api(endpoints, {}, console=proxied) as own, aiohttp.ClientSession(
            cookie_jar=cookie_jar(own.console_url)) as session:
        assert own.console_url != own.url
        async with session.get(f"{own.console_url}/console/api/me", headers=anna) as answer:
            me = await answer.json()
        assert (me["operator_id"], me["tenant"], me["proxy"]) == ("anna@acme.example", TENANT_A, True)
        async with session.get(f"{own.console_url}/v1/runs", headers=anna,
                               params={"principal": principal}) as answer:
            assert [run["run_id"] for run in (await answer.json())["items"]] == [mine.run_id]
        for stranger in ({"X-Forwarded-Email": "mallory@evil.example"}, {}):
            async with session.get(f"{own.console_url}/console/api/me", headers=stranger) as answer:
                assert answer.status == 401
        # The API's port is reached by API clients directly: there the header is nobody.
        async with session.get(f"{own.url}/v1/runs", headers=anna) as answer:
            assert answer.status == 401
        async with session.get(f"{own.url}/console/api/me", headers=anna) as answer:
            assert answer.status == 404
        # With a proxy in front, a pasted token is not who is at the console.
        async with session.post(f"{own.console_url}/console/session",
                                json={"token": OPERATOR_TOKEN}) as answer:
            assert (answer.status, (await answer.json())["error"]["code"]) == (409, "signed_in_by_proxy")
