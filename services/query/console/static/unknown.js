// The UNKNOWN queue and the resolve form. The form sends what the operator typed; who they
// are comes from their session on the server, never from the form.

import { allPages, api, post, session, showVerdict } from "./api.js";
import { age, ageCell, changed, el, frame, refreshAges, region, short, stateCell, table } from "./dom.js";
import { eventTable, runEvents, runLink } from "./timeline.js";

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export async function unknownQueue(view, [callId], fresh, current) {
  frame(view, fresh, () => [
    el("h1", {}, "UNKNOWN queue"),
    el("p", {}, "Calls whose outcome nobody knows yet (UNKNOWN, RECONCILING) and calls waiting for a person (MANUAL_REVIEW), oldest first."),
    el("div", { id: "resolve-panel" }),
    el("div", { id: "unknown-list" }),
  ]);
  const [unknown, review] = await Promise.all([
    allPages("/v1/unknown", { limit: 1000 }, 5), allPages("/v1/manual-review", { limit: 1000 }, 5)]);
  if (!current()) return;
  const calls = [...unknown, ...review];
  if (changed("unknown-list", calls.map((call) => ({ ...call, age_seconds: null })))) {  // ages: below
    region("unknown-list").replaceChildren(calls.length
      ? table(["run", "call", "tenant", "tool", "state", "unknown for", "attempts", "reason", ""], calls.map(queueRow))
      : el("p", {}, "Nothing is unknown. Every call has an outcome."));
  }
  refreshAges(region("unknown-list"));
  const panel = region("resolve-panel");
  if (!callId) {
    panel.replaceChildren();
    delete panel.dataset.call;
  } else if (panel.dataset.call !== callId) {
    if (!UUID.test(callId)) throw new Error(`not a call id: ${callId}`);
    const built = await resolvePanel(callId);
    if (!current()) return;
    panel.replaceChildren(built);
    panel.dataset.call = callId;  // only once built: a failed load is tried again next refresh
  }
}

function queueRow(call) {
  return el("tr", { "data-call": call.logical_call_id },
    el("td", { class: "mono" }, el("a", { href: runLink(call.tenant_id, call.run_id) }, call.run_id)),
    el("td", { class: "mono" }, short(call.logical_call_id)), el("td", {}, call.tenant_id),
    el("td", {}, call.tool_name || ""), el("td", {}, stateCell(call.state)),
    call.unknown_since ? ageCell(call.unknown_since) : el("td", {}, "-"),
    el("td", {}, call.attempts), el("td", {}, call.reason || ""),
    el("td", {}, el("a", { href: `#/unknown/${call.logical_call_id}`, class: "resolve-link" }, "resolve…")));
}

async function resolvePanel(callId) {
  const call = await api(`/v1/calls/${callId}`);
  const events = (await runEvents(call.tenant_id, call.run_id)).filter((e) => e.logical_call_id === callId);
  const verdict = el("p", { class: "verdict", role: "status" });
  const form = el("form", { id: "resolve-form" },
    el("span", {}, "outcome"),
    el("span", {},
      el("label", {}, el("input", { type: "radio", name: "outcome", value: "succeeded", checked: true }), " succeeded (the effect happened)"), " ",
      el("label", {}, el("input", { type: "radio", name: "outcome", value: "failed" }), " failed (it did not)")),
    el("label", { for: "receipt_id" }, "downstream receipt"),
    el("input", { id: "receipt_id", name: "receipt_id", placeholder: "the downstream's id of the effect (for succeeded)" }),
    el("label", { for: "result" }, "result fields (JSON)"),
    el("textarea", { id: "result", name: "result", placeholder: '{"balance_minor": 6000}' }),
    el("label", { for: "reason" }, "reason"),
    el("input", { id: "reason", name: "reason", required: true }),
    el("label", { for: "evidence" }, "evidence"),
    el("textarea", { id: "evidence", name: "evidence", required: true, placeholder: "what you checked: a statement line, a ticket, a query" }),
    el("span", {}),
    el("button", { type: "submit" }, `Resolve as ${session.me.operator_id}`));
  form.addEventListener("submit", (event) => submitResolution(event, call, form, verdict));
  return el("section", { class: "panel" },
    el("h2", {}, "Resolve ", el("span", { class: "mono" }, callId)),
    el("section", { class: "call" }, el("dl", {},
      el("dt", {}, "run"), el("dd", { class: "mono" }, call.run_id),
      el("dt", {}, "tool"), el("dd", {}, call.tool_name || "-"),
      el("dt", {}, "state"), el("dd", {}, stateCell(call.state)),
      el("dt", {}, "operation key"), el("dd", { class: "mono" }, call.operation_key || "-"),
      el("dt", {}, "attempts (sends and lookups)"), el("dd", {}, call.attempts),
      el("dt", {}, "unknown since"), el("dd", {}, call.unknown_since ? `${age(call.unknown_since)} ago` : "-"))),
    el("h3", {}, "Evidence recorded so far"),
    eventTable(events),
    el("p", {}, "The dispatcher applies the resolution only if the policy's resolution rules name you for this tenant and tool, and only while the call is unresolved; your identity and reason are recorded in the run's history."),
    form, verdict);
}

async function submitResolution(event, call, form, verdict) {
  event.preventDefault();
  const data = new FormData(form);
  let result = null;
  try {
    const text = String(data.get("result") || "").trim();
    result = text ? JSON.parse(text) : null;
  } catch (problem) {
    verdict.textContent = `result fields are not JSON: ${problem.message}`;
    verdict.className = "verdict error";
    return;
  }
  await showVerdict(verdict, () => post(`/console/api/calls/${call.logical_call_id}/resolution`, {
    outcome: data.get("outcome"), reason: data.get("reason"), evidence: data.get("evidence"),
    receipt_id: data.get("receipt_id") || null, result,
  }), (answer) => `${answer.status}: the call is ${answer.state}${answer.reason ? ` (${answer.reason})` : ""}`);
}
