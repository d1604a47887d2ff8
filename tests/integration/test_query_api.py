"""The query API on real PostgreSQL, against read-model rows written as the projection would:
filters, keyset pages, timelines with their audit fields, queues, errors, and tenant isolation
through the API. Every answer is also checked against the served OpenAPI document."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from shared.db.schemas import migrate_service
from tests.support.query_api import query_api
from tests.support.query_rows import seed_call, seed_event, seed_run, unique

pytestmark = pytest.mark.infra

TENANT_A, TENANT_B = unique("acme"), unique("globex")
KEY_A, KEY_B, OPERATOR = unique("key-a"), unique("key-b"), unique("ops")


@pytest.fixture(scope="module")
async def api(pool, endpoints):
    await migrate_service(pool, "projection")
    async with query_api(endpoints, {KEY_A: TENANT_A, KEY_B: TENANT_B, OPERATOR: "*"}) as client:
        yield client


async def test_runs_page_by_run_id_without_duplicates_or_gaps(pool, api):
    principal = unique("agent")
    runs = [(await seed_run(pool, TENANT_A, principal=principal)).run_id for _ in range(7)]
    pages = await api.pages("/v1/runs", KEY_A, principal=principal, limit=3)
    assert [len(page) for page in pages] == [3, 3, 1]
    assert [run["run_id"] for page in pages for run in page] == sorted(runs)


async def test_calls_are_filtered_by_tool_state_principal_run_and_time(pool, api):
    principal, long_ago = unique("agent"), datetime.now(UTC) - timedelta(days=3)
    run = await seed_run(pool, TENANT_A, principal=principal)
    debit = await seed_call(pool, run, tool="wallet.debit", state="SUCCEEDED")
    failed = await seed_call(pool, run, tool="wallet.debit", state="FAILED")
    reserve = await seed_call(pool, run, tool="warehouse.reserve", state="SUCCEEDED")
    old = await seed_call(pool, run, tool="wallet.debit", state="SUCCEEDED", updated_at=long_ago)

    async def ids(**filters) -> list[str]:
        status, body = await api.get("/v1/calls", KEY_A, principal=principal, **filters)
        assert status == 200, body
        return [call["logical_call_id"] for call in body["items"]]

    assert await ids(tool="warehouse.reserve") == [str(reserve)]
    assert await ids(tool="wallet.debit", state="FAILED") == [str(failed)]
    assert await ids(state=["FAILED", "SUCCEEDED"]) == [str(c) for c in (debit, failed, reserve, old)]
    assert await ids(until=(long_ago + timedelta(hours=1)).isoformat()) == [str(old)]
    assert await ids(since=(long_ago + timedelta(hours=1)).isoformat(), run=run.run_id) == [
        str(debit), str(failed), str(reserve)]
    assert await ids(run=unique("run")) == []


async def test_calls_page_in_creation_order_across_pages(pool, api):
    run = await seed_run(pool, TENANT_A, principal=unique("agent"))
    calls = [str(await seed_call(pool, run)) for _ in range(5)]
    pages = await api.pages("/v1/calls", KEY_A, run=run.run_id, limit=2)
    assert [call["logical_call_id"] for page in pages for call in page] == calls


async def test_a_run_answers_with_its_calls(pool, api):
    run = await seed_run(pool, TENANT_A)
    calls = [str(await seed_call(pool, run)), str(await seed_call(pool, run, state="UNKNOWN"))]
    status, body = await api.get(f"/v1/runs/{run.run_id}", KEY_A)
    assert status == 200
    assert body["run"]["run_id"] == run.run_id and body["run"]["calls"] == 2
    assert [call["logical_call_id"] for call in body["calls"]] == calls
    status, call = await api.get(f"/v1/calls/{calls[1]}", KEY_A)
    assert status == 200 and call["state"] == "UNKNOWN" and call["result"] == {"balance_minor": 6000}


async def test_a_run_with_more_calls_than_one_answer_holds_pages_through_the_rest(pool, api):
    """``GET /v1/runs/{id}`` used to return every call of a run in one answer, however many."""
    run = await seed_run(pool, TENANT_A)
    calls = [str(await seed_call(pool, run)) for _ in range(130)]
    status, body = await api.get(f"/v1/runs/{run.run_id}", KEY_A)
    assert status == 200 and body["run"]["calls"] == 130
    assert [call["logical_call_id"] for call in body["calls"]] == calls[:100]
    status, rest = await api.get("/v1/calls", KEY_A, run=run.run_id, after=body["more_calls"])
    assert status == 200 and rest["next"] is None
    assert [call["logical_call_id"] for call in rest["items"]] == calls[100:]
    _, small = await api.get(f"/v1/runs/{(await seed_run(pool, TENANT_A)).run_id}", KEY_A)
    assert small["more_calls"] is None


async def test_the_timeline_is_in_history_order_with_every_audit_field(pool, api):
    run = await seed_run(pool, TENANT_A, principal="agent-7")
    call = await seed_call(pool, run)
    later = datetime.now(UTC) + timedelta(minutes=5)
    events = [await seed_event(pool, run, "DispatchIntentRecorded", call=call, occurred_at=later),
              await seed_event(pool, run, "ToolAttemptStarted", call=call, attempt=1),
              await seed_event(pool, run, "ToolResultRecorded", call=call, attempt=1)]
    pages = await api.pages(f"/v1/runs/{run.run_id}/timeline", KEY_A, limit=2)
    timeline = [event for page in pages for event in page]
    assert [event["event_id"] for event in timeline] == [str(e) for e in events]
    assert [e["position"] for e in timeline] == sorted(e["position"] for e in timeline)
    started = timeline[1]
    assert {name: started[name] for name in (
        "event_type", "principal_id", "tenant_id", "policy_version", "worker_id", "fence",
        "attempt", "receipt_id", "logical_call_id")} == {
        "event_type": "ToolAttemptStarted", "principal_id": "agent-7", "tenant_id": TENANT_A,
        "policy_version": "policy-v7", "worker_id": "worker-a", "fence": 2, "attempt": 1,
        "receipt_id": f"rcpt-{call}", "logical_call_id": str(call)}
    assert started["trace_id"].startswith("trace-") and started["occurred_at"]
    status, body = await api.get(f"/v1/runs/{run.run_id}/timeline", KEY_A,
                                 event_type="ToolResultRecorded")
    assert [event["event_id"] for event in body["items"]] == [str(events[2])]


async def test_the_unknown_queue_lists_unknown_and_reconciling_oldest_first_with_ages(pool, api):
    principal = unique("agent")
    run = await seed_run(pool, TENANT_A, principal=principal)
    recent = await seed_call(pool, run, state="UNKNOWN", unknown_for=60)
    oldest = await seed_call(pool, run, state="RECONCILING", unknown_for=3600)
    await seed_call(pool, run, state="SUCCEEDED")
    status, body = await api.get("/v1/unknown", KEY_A, principal=principal)
    assert status == 200
    assert [c["logical_call_id"] for c in body["items"]] == [str(oldest), str(recent)]
    ages = [c["age_seconds"] for c in body["items"]]
    assert 3600 <= ages[0] < 3660 and 60 <= ages[1] < 120
    pages = await api.pages("/v1/unknown", KEY_A, principal=principal, limit=1)
    assert [c["logical_call_id"] for page in pages for c in page] == [str(oldest), str(recent)]


async def test_manual_review_and_compensations_list_their_calls(pool, api):
    principal = unique("agent")
    run = await seed_run(pool, TENANT_A, principal=principal)
    review = await seed_call(pool, run, state="MANUAL_REVIEW")
    compensated = await seed_call(pool, run, state="COMPENSATED")
    refund = await seed_call(pool, run, state="SUCCEEDED", tool="wallet.refund", compensates=compensated)
    failing = await seed_call(pool, run, state="COMPENSATION_FAILED")
    _, manual = await api.get("/v1/manual-review", KEY_A, principal=principal)
    assert [c["logical_call_id"] for c in manual["items"]] == [str(review)]
    _, body = await api.get("/v1/compensations", KEY_A, principal=principal)
    assert [(c["logical_call_id"], [k["logical_call_id"] for k in c["compensating_calls"]])
            for c in body["items"]] == [(str(compensated), [str(refund)]), (str(failing), [])]
    _, only_failed = await api.get("/v1/compensations", KEY_A, principal=principal,
                                   state="COMPENSATION_FAILED")
    assert [c["logical_call_id"] for c in only_failed["items"]] == [str(failing)]


async def test_a_tenant_key_never_sees_another_tenants_rows(pool, api):
    run = await seed_run(pool, TENANT_A)
    call = await seed_call(pool, run, state="UNKNOWN", unknown_for=10)
    await seed_event(pool, run, "ToolAttemptStarted", call=call, attempt=1)
    await seed_event(pool, run, "ToolOutcomeMarkedUnknown", call=call)
    for filters in ({}, {"tenant": TENANT_A}):
        for path in ("/v1/runs", "/v1/calls", "/v1/unknown"):
            _, body = await api.get(path, KEY_B, **filters)
            assert all(item["tenant_id"] == TENANT_B for item in body["items"]), path
    for asked in ({}, {"tenant": TENANT_A}):  # naming A's tenant gets B no further
        assert (await api.get(f"/v1/runs/{run.run_id}", KEY_B, **asked))[0] == 404
        assert (await api.get(f"/v1/runs/{run.run_id}/timeline", KEY_B, **asked))[0] == 404
    assert (await api.get(f"/v1/calls/{call}", KEY_B))[0] == 404
    _, own = await api.get(f"/v1/runs/{run.run_id}/timeline", KEY_A)
    assert len(own["items"]) == 2
    _, everyone = await api.get("/v1/calls", OPERATOR, run=run.run_id)
    assert [c["logical_call_id"] for c in everyone["items"]] == [str(call)]


async def test_dead_letters_are_for_operator_keys_only(api):
    status, body = await api.get("/v1/dead-letters", KEY_A)
    assert status == 403 and body["error"]["code"] == "operator_only"
    status, body = await api.get("/v1/dead-letters", OPERATOR, topic=unique("no.such.topic"))
    assert status == 200 and body == {"items": [], "next": None}


@pytest.mark.parametrize("path, key, params, status, code", [
    ("/v1/runs", None, {}, 401, "unauthenticated"),
    ("/v1/runs", "not-a-key", {}, 401, "unauthenticated"),
    ("/v1/runs", "KEY_A", {"limit": 0}, 400, "invalid_parameter"),
    ("/v1/runs", "KEY_A", {"since": "yesterday"}, 400, "invalid_parameter"),
    ("/v1/runs", "KEY_A", {"colour": "red"}, 400, "invalid_parameter"),
    ("/v1/runs", "KEY_A", {"after": "bm90IGEgY3Vyc29y"}, 400, "invalid_cursor"),
    ("/v1/calls", "KEY_A", {"after": "WyJjYWxscyIsIFsienp6Il1d"}, 400, "invalid_cursor"),
    ("/v1/calls/not-a-uuid", "KEY_A", {}, 400, "invalid_parameter"),
    ("/v1/nothing-here", None, {}, 404, "not_found"),
], ids=["no key", "unknown key", "limit 0", "bad time", "unknown filter", "bad cursor",
        "cursor not a call id", "bad call id", "no route"])
async def test_errors_are_json_with_a_machine_readable_code(api, path, key, params, status, code):
    answer = await api.get(path, {"KEY_A": KEY_A}.get(key, key), **params)
    assert answer[0] == status and answer[1]["error"]["code"] == code


async def test_a_cursor_of_one_listing_is_refused_by_another(pool, api):
    principal = unique("agent")
    for _ in range(2):
        await seed_run(pool, TENANT_A, principal=principal)
    _, page = await api.get("/v1/runs", KEY_A, principal=principal, limit=1)
    status, body = await api.get("/v1/calls", KEY_A, after=page["next"])
    assert status == 400 and body["error"]["code"] == "invalid_cursor"


async def test_health_and_the_document_need_no_key(api):
    assert await api.get("/healthz", None) == (200, {"status": "ok"})
    status, document = await api.get("/openapi.json", None)
    assert status == 200 and document["openapi"] == "3.1.0"
