"""The operator console in a real headless chromium against the real stack.

The crash-after-debit story: the wallet commits the debit and its answer is lost; the tool
offers no lookup, so the call waits in MANUAL_REVIEW. An operator signs in, finds the run,
reads its timeline, resolves the call from the UNKNOWN queue's form with the wallet's receipt
and sees the run complete, with their identity (from the session, not the form) and evidence
in the history, and still one debit. An operator cancels a run from its page. Then: tool output
with markup is shown as text, and a page of 1,000 runs renders and keeps refreshing.
"""

from __future__ import annotations

import json
import uuid

import pytest
from playwright.async_api import expect

from services.query.console.settings import ConsoleSettings, ConsoleUser
from shared import faults
from tests.browser.conftest import screenshot
from tests.support.identities import fresh_principal
from tests.support.dispatch import call_row, settled
from tests.support.pipeline import answer, debit, decision, names, propose
from tests.support.pipeline_stack import POLICY, RESOLUTIONS, pipeline, pipeline_stage, projected
from tests.support.query_api import query_api
from tests.support.query_rows import seed_call, seed_event, seed_run, unique
from tests.support.wallet import debits_under, new_wallet

pytestmark = [pytest.mark.infra, pytest.mark.tooling]
TOKEN = unique("console-token")
OPERATOR = ConsoleSettings(tokens={TOKEN: ConsoleUser(id="operator:dana", tenant="*")})
MARKUP = "<b>statement</b> line 7 <img src=x onerror=\"window.__xss='evidence'\">"


@pytest.fixture
async def stage(pool, endpoints, tmp_path):
    yield await pipeline_stage(pool, endpoints, tmp_path)
    faults.configure("")  # the wallet runs in this process; its fault rules must not outlive us


async def sign_in(page, url: str, token: str = TOKEN) -> None:
    await page.goto(f"{url}/console/")
    await page.fill("#token", token)
    await page.click("#sign-in-form button[type=submit]")
    await expect(page.locator("#who")).not_to_be_empty()


async def test_an_operator_finds_the_stuck_run_reads_its_timeline_and_resolves_it(
        stage, pool, endpoints, page):
    run_id, tag = names()
    principal = fresh_principal()
    wallet_id = await new_wallet(pool, 10_000)
    stage.write_registry(**{"wallet.debit": {"reconciliation": "manual"}})
    stage.write_policy({**POLICY, "resolutions": RESOLUTIONS})
    async with pipeline(stage, wallet={"faults": "wallet.after_commit_drop_response=drop"}), \
            query_api(endpoints, {}, console=OPERATOR, resolutions_topic=stage.resolutions) as api:
        await propose(stage, debit(run_id, principal, wallet_id, "25.00", call_id="call-c",
                                   key="order-c"))
        call_id = (await answer(pool, stage, run_id, "call-c"))["payload"]["logical_call_id"]
        assert await settled(pool, uuid.UUID(call_id)) == "MANUAL_REVIEW"
        assert await projected(pool, "runs", "run_id", run_id, where=" AND status = 'needs_attention'")
        operation_key = (await call_row(pool, uuid.UUID(call_id)))["operation_key"]
        recorded = json.loads(await pool.fetchval(
            "SELECT response FROM wallet.idempotency_keys WHERE operation_key = $1", operation_key))

        await sign_in(page, api.url)
        await expect(page.locator("#who")).to_have_text("operator:dana · every tenant")
        await page.fill("#run-filters input[name=principal]", principal)
        await page.click("#run-filters button[type=submit]")
        found = page.locator(f"tr[data-run='{run_id}']")
        await expect(found).to_contain_text("needs_attention")
        await expect(page.locator("#counts")).to_contain_text("MANUAL_REVIEW")
        await screenshot(page, "1-runs")

        await found.locator("a").click()
        call = page.locator(f"section[data-call='{call_id}']")
        await expect(call.locator(".machine .step.current")).to_have_text("MANUAL_REVIEW")
        await expect(call.locator(".machine .step.visited", has_text="DISPATCHING")).to_have_count(1)
        await expect(call.locator("tr[data-event='ToolAttemptStarted']")).to_have_count(1)
        await expect(call.locator("tr[data-event='ManualReviewRequired']")).to_have_count(1)
        await expect(call).to_contain_text(operation_key)
        await screenshot(page, "2-timeline")

        await page.click("nav a[data-view=unknown]")
        queued = page.locator(f"#unknown-list tr[data-call='{call_id}']")
        await expect(queued).to_contain_text("MANUAL_REVIEW")
        await queued.locator("a.resolve-link").click()
        await expect(page.locator("#resolve-form")).to_be_visible()
        await page.fill("#receipt_id", recorded["receipt_id"])
        await page.fill("#result", json.dumps(recorded["result"]))
        await page.fill("#reason", "the wallet's answers were lost")
        await page.fill("#evidence", MARKUP)
        await screenshot(page, "3-unknown-queue")
        await page.click("#resolve-form button[type=submit]")
        await expect(page.locator(".verdict")).to_have_attribute("data-status", "applied",
                                                                timeout=60_000)
        await expect(page.locator(".verdict")).to_contain_text("SUCCEEDED")

        await page.goto(f"{api.url}/console/#/runs/acme/{run_id}")
        await expect(page.locator("#run-status")).to_have_text("completed", timeout=90_000)
        resolved = call.locator("tr[data-event='ToolOutcomeResolved']")
        await expect(resolved).to_contain_text("operator:dana")
        await expect(resolved).to_contain_text(MARKUP)  # shown as the text the operator typed
        await expect(call.locator(".machine .step.current")).to_have_text("SUCCEEDED")
        await screenshot(page, "4-run-completed")

        await page.click("nav a[data-view=health]")
        await expect(page.locator(".chart")).to_have_count(5)
        await expect(page.locator(".chart[data-series^='Retry amplification']")).not_to_contain_text(
            "no data")
        await screenshot(page, "5-health")
    assert await page.evaluate("window.__xss") is None
    assert await debits_under(pool, operation_key) == 1  # resolved, not debited again
    history = await projected(pool, "events", "logical_call_id", uuid.UUID(call_id),
                              where=" AND event_type = 'ToolOutcomeResolved'")
    payload = json.loads(history["envelope"])["payload"]
    assert (payload["operator_id"], payload["evidence"]) == ("operator:dana", MARKUP)


async def test_an_operator_cancels_a_run_whose_call_waits_for_approval(
        stage, pool, endpoints, page):
    """The call waiting for a person is denied ``run_cancelled`` (nobody is asked any more),
    never sent; the call already done stands (no compensation asked)."""
    run_id, _ = names()
    principal = fresh_principal()
    wallet_id = await new_wallet(pool, 100_000)
    stage.write_policy({"capability_ttl_seconds": 120, "rules": [
        {**POLICY["rules"][0], "max_amount_minor": 5000, "currency": "EUR",
         "over_cap": "require_approval",
         "approval": {"quorum": 1, "approvers": ["operator:*"], "ttl_seconds": 600}}]})
    async with pipeline(stage), \
            query_api(endpoints, {}, console=OPERATOR, resolutions_topic=stage.resolutions) as api:
        await propose(stage, debit(run_id, principal, wallet_id, "10.00", call_id="done", key="a"),
                      debit(run_id, principal, wallet_id, "90.00", call_id="big", key="b"))
        done = (await answer(pool, stage, run_id, "done"))["payload"]
        big = (await answer(pool, stage, run_id, "big"))["payload"]
        assert await settled(pool, uuid.UUID(done["logical_call_id"])) == "SUCCEEDED"
        await decision(pool, big["logical_call_id"], "awaiting_approval")

        await sign_in(page, api.url)
        await page.goto(f"{api.url}/console/#/runs/acme/{run_id}")
        await page.click("#cancel-panel summary")
        await page.fill("#cancel-reason", "the customer called to stop it")
        await screenshot(page, "8-cancel-run")
        await page.click("#cancel-form button[type=submit]")
        await expect(page.locator("#cancel-panel .verdict")).to_have_attribute(
            "data-status", "applied", timeout=60_000)

        withdrawn = await decision(pool, big["logical_call_id"], "denied")
        await expect(page.locator("#run-summary")).to_contain_text("run_cancelled", timeout=60_000)
    assert withdrawn["reason_code"] == "run_cancelled"
    assert await debits_under(pool, big["operation_key"]) == 0
    assert await debits_under(pool, done["operation_key"]) == 1
    cancelled_by = await pool.fetchval(
        "SELECT request->>'operator_id' FROM dispatcher.cancellations WHERE run_id = $1", run_id)
    assert cancelled_by == "operator:dana"  # from the session, not the form


async def test_tool_output_with_markup_is_shown_as_inert_text(pool, endpoints, page):
    run = await seed_run(pool, unique("acme"), status="needs_attention")
    hostile = "<script>window.__xss='result'</script><img src=x onerror=window.__xss='img'><b>bold</b>"
    call = await seed_call(pool, run, state="MANUAL_REVIEW", unknown_for=30, result={"note": hostile})
    await seed_event(pool, run, "ManualReviewRequired", call=call, attempt=1,
                     payload={"state": "MANUAL_REVIEW", "detail": hostile})
    async with query_api(endpoints, {}, console=OPERATOR) as api:
        await sign_in(page, api.url)
        await page.goto(f"{api.url}/console/#/runs/{run.tenant}/{run.run_id}")
        section = page.locator(f"section[data-call='{call}']")
        await expect(section.locator("pre.result")).to_contain_text(hostile)
        await expect(section.locator("tr[data-event='ManualReviewRequired']")).to_contain_text(hostile)
        await page.goto(f"{api.url}/console/#/unknown/{call}")
        await expect(page.locator("#resolve-panel")).to_contain_text(hostile)
        await screenshot(page, "6-markup-as-text")
        assert await page.locator("main script, main img, main b").count() == 0
        assert await page.evaluate("window.__xss") is None


async def test_a_thousand_runs_on_one_page_render_and_keep_refreshing(pool, endpoints, page):
    tenant = unique("bulk")
    rows = [(f"{tenant}-run-{index:04d}", tenant) for index in range(1000)]
    await pool.executemany(
        "INSERT INTO projection.runs (run_id, tenant_id, principal_id, status, calls, updated_at, "
        "projection_hash, reducer_version) VALUES ($1, $2, 'agent-bulk', 'running', 1, now(), "
        "'sha256:seeded', 'seed')", rows)
    try:
        async with query_api(endpoints, {}, console=OPERATOR) as api:
            await sign_in(page, api.url)
            await page.fill("#run-filters input[name=tenant]", tenant)
            await page.select_option("#run-filters select[name=limit]", "1000")
            await page.click("#run-filters button[type=submit]")
            await expect(page.locator("#run-list tbody tr")).to_have_count(1000)
            # Tag a row, type a filter without submitting it, and let the page refresh twice.
            await page.locator("#run-list tbody tr").first.evaluate("row => { row.dataset.seen = 'yes'; }")
            await page.fill("#run-filters input[name=principal]", "half-typ")
            for _ in range(2):
                first = await page.locator("#refreshed").text_content()
                await expect(page.locator("#refreshed")).not_to_have_text(first, timeout=15_000)
            await expect(page.locator("#run-list tbody tr")).to_have_count(1000)
            assert await page.locator("#run-list tbody tr[data-seen=yes]").count() == 1  # not redrawn
            assert await page.input_value("#run-filters input[name=principal]") == "half-typ"
            await expect(page.locator("#page-note")).to_have_text("page 1: 1000 runs, by run id")
            await page.fill("#run-filters input[name=principal]", "")
            await page.select_option("#run-filters select[name=limit]", "100")
            await page.click("#run-filters button[type=submit]")
            await expect(page.locator("#page-note")).to_have_text("page 1: 100 runs, by run id")
            await page.click("#next-page")
            await expect(page.locator("#page-note")).to_have_text("page 2: 100 runs, by run id")
            await expect(page.locator("#run-list tbody tr").first).to_have_attribute(
                "data-run", f"{tenant}-run-0100")
            await page.click("#first-page")
            await expect(page.locator("#run-list tbody tr").first).to_have_attribute(
                "data-run", f"{tenant}-run-0000")
            await page.fill("#run-filters input[name=principal]", "nobody")  # still responsive
            await page.click("#run-filters button[type=submit]")
            await expect(page.locator("#run-list tbody tr")).to_have_count(0)
            await screenshot(page, "7-empty-filter")
    finally:
        await pool.execute("DELETE FROM projection.runs WHERE tenant_id = $1", tenant)
