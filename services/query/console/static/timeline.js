// One run: every event in history order, grouped per intent, with the call's state
// machine drawn. The tool's result is shown as untrusted text.

import { allPages, api, post, query, session, showVerdict } from "./api.js";
import { changed, el, frame, region, short, stateCell, table } from "./dom.js";

const MACHINE = [
  ["VALIDATED", "AWAITING_APPROVAL", "AUTHORIZED", "INTENT_RECORDED", "DISPATCHING"],
  ["UNKNOWN", "RECONCILING", "MANUAL_REVIEW"],
  ["SUCCEEDED", "FAILED", "DENIED", "EXPIRED"],
  ["COMPENSATING", "COMPENSATED", "COMPENSATION_FAILED"],
];
export const UNRESOLVED = new Set(["UNKNOWN", "RECONCILING", "MANUAL_REVIEW"]);
// The intake's and the policy's events name no dispatcher state; these are the states they mean.
const STATE_OF_EVENT = {
  ProposalAccepted: "VALIDATED", ApprovalRequested: "AWAITING_APPROVAL",
  AuthorizationAllowed: "AUTHORIZED", AuthorizationDenied: "DENIED",
};

// Where a run is shown: named by its tenant and id (run ids are per tenant).
export function runLink(tenant, runId) {
  return `#/runs/${encodeURIComponent(tenant)}/${encodeURIComponent(runId)}`;
}

export function runEvents(tenant, runId) {
  return allPages(`/v1/runs/${encodeURIComponent(runId)}/timeline`, { tenant, limit: 1000 });
}

// The run with all its calls: its detail shows the first page, /v1/calls?tenant=&run= the rest.
async function runDetail(tenant, runId) {
  const detail = await api(`/v1/runs/${encodeURIComponent(runId)}${query({ tenant })}`);
  if (detail.more_calls) {
    detail.calls.push(...await allPages("/v1/calls", { tenant, run: runId, limit: 1000 }, 20,
      detail.more_calls));
  }
  return detail;
}

export async function timeline(view, [tenant, runId], fresh, current) {
  frame(view, fresh, () => [
    el("p", {}, el("a", { href: "#/runs" }, "← runs")),
    el("h1", {}, "Run ", el("span", { class: "mono" }, runId)),
    el("div", { id: "run-summary" }),
    cancelPanel(tenant, runId),
    el("div", { id: "run-calls" }),
  ]);
  const [detail, events] = await Promise.all([runDetail(tenant, runId), runEvents(tenant, runId)]);
  if (!current() || !changed("run-calls", [detail, events])) return;
  const run = detail.run;
  region("run-summary").replaceChildren(el("section", { class: "call" }, el("dl", {},
    el("dt", {}, "status"), el("dd", { id: "run-status" }, stateCell(run.status)),
    el("dt", {}, "tenant"), el("dd", {}, run.tenant_id),
    el("dt", {}, "principal"), el("dd", {}, run.principal_id),
    el("dt", {}, "calls"), el("dd", {}, run.calls),
    el("dt", {}, "stop reason"), el("dd", {}, run.stop_reason || "-"))));
  const byCall = new Map();
  for (const event of events) {
    const key = event.logical_call_id || "run";
    if (!byCall.has(key)) byCall.set(key, []);
    byCall.get(key).push(event);
  }
  const sections = detail.calls.map((call) => callSection(call, byCall.get(call.logical_call_id) || []));
  if (byCall.has("run")) {
    sections.push(el("section", { class: "call" }, el("h2", {}, "Run events"), eventTable(byCall.get("run"))));
  }
  region("run-calls").replaceChildren(...sections);
}

// Cancelling: built once per view, so a refresh never wipes what the operator is typing. The
// dispatcher decides: calls not yet sent are refused, calls already sent settle with their truth.
function cancelPanel(tenant, runId) {
  const verdict = el("p", { class: "verdict", role: "status" });
  const form = el("form", { id: "cancel-form" },
    el("label", { for: "cancel-reason" }, "reason"),
    el("input", { id: "cancel-reason", name: "reason", required: true }),
    el("span", {}),
    el("label", {}, el("input", { type: "checkbox", name: "compensate" }),
      " also undo its done steps (their tools' compensations)"),
    el("span", {}),
    el("button", { type: "submit" }, `Cancel run as ${session.me?.operator_id || "you"}`));
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const data = new FormData(form);
    await showVerdict(verdict, () => post(
      `/console/api/runs/${encodeURIComponent(tenant)}/${encodeURIComponent(runId)}/cancellation`,
      { reason: data.get("reason"), compensate: data.get("compensate") === "on" }),
    (answer) => `${answer.status}${answer.reason ? `: ${answer.reason}` : ""}`);
  });
  return el("details", { class: "panel", id: "cancel-panel" }, el("summary", {}, "Cancel this run…"),
    el("p", {}, "Calls not yet sent are refused (run_cancelled); calls already sent settle with their true outcome. Applied only if you are an operator of the run's tenant, and only once."),
    form, verdict);
}

function callSection(call, events) {
  const visited = new Set(events.map((e) => e.payload?.state || STATE_OF_EVENT[e.event_type]).filter(Boolean));
  visited.add(call.state);
  return el("section", { class: "call", "data-call": call.logical_call_id },
    el("h2", {}, call.tool_name || "(tool not named)", " ", el("span", { class: "mono" }, call.logical_call_id),
      " ", stateCell(call.state)),
    machine(visited, call.state),
    el("dl", {},
      el("dt", {}, "operation key"), el("dd", { class: "mono" }, call.operation_key || "-"),
      el("dt", {}, "attempts"), el("dd", {}, call.attempts),
      el("dt", {}, "fence"), el("dd", {}, call.fence ?? "-"),
      el("dt", {}, "worker"), el("dd", { class: "mono" }, call.worker_id || "-"),
      el("dt", {}, "policy version"), el("dd", { class: "mono" }, call.policy_version || "-"),
      el("dt", {}, "receipt"), el("dd", { class: "mono" }, call.receipt_id || "-"),
      el("dt", {}, "reason"), el("dd", {}, call.reason || "-"),
      el("dt", {}, "result (tool output, untrusted)"),
      el("dd", {}, el("pre", { class: "untrusted result" }, call.result === null ? "-" : JSON.stringify(call.result, null, 2)))),
    UNRESOLVED.has(call.state) ? el("p", {}, el("a", { href: `#/unknown/${call.logical_call_id}` }, "resolve this call…")) : null,
    eventTable(events));
}

function machine(visited, current) {
  const lanes = MACHINE.map((lane) => el("span", { class: "lane" }, lane.flatMap((state, index) => [
    index ? el("span", { class: "arrow" }, "→") : null,
    el("span", { class: `step${visited.has(state) ? " visited" : ""}${state === current ? " current" : ""}`,
      title: state }, state)])));
  return el("div", { class: "machine", "aria-label": `state machine, now ${current}` },
    lanes.flatMap((lane, index) => [index ? el("span", { class: "arrow" }, "⇒") : null, lane]));
}

export function eventTable(events) {
  return table(["#", "when", "event", "state", "principal", "policy", "worker", "fence", "attempt", "receipt", "detail", "trace"],
    events.map((e) => el("tr", { "data-event": e.event_type },
      el("td", {}, e.position), el("td", { class: "when" }, new Date(e.occurred_at).toLocaleTimeString([], { hour12: false })),
      el("td", {}, e.event_type), el("td", {}, e.payload?.state ? stateCell(e.payload.state) : ""),
      el("td", {}, e.principal_id || ""), el("td", { class: "mono" }, (e.policy_version || "").slice(0, 8)),
      el("td", { class: "mono" }, e.worker_id || ""), el("td", {}, e.fence ?? ""), el("td", {}, e.attempt ?? ""),
      el("td", { class: "mono" }, e.receipt_id ? short(e.receipt_id) : ""),
      el("td", { class: "detail" }, detailOf(e.payload)), el("td", { class: "mono" }, (e.trace_id || "").slice(0, 8)))));
}

function detailOf(payload) {
  const parts = [];
  for (const name of ["reason", "detail", "operator_id", "evidence", "reason_code"]) {
    if (payload?.[name]) parts.push(`${name}: ${payload[name]}`);
  }
  if (payload?.result) parts.push(`result: ${JSON.stringify(payload.result)}`);
  return parts.join("; ");
}
