// Runs: a filterable list, a page of up to 1,000, with live counts per state.

import { api, query } from "./api.js";
import { ageCell, changed, el, frame, refreshAges, region, stateCell, table } from "./dom.js";
import { runLink } from "./timeline.js";

const RUN_STATES = ["running", "needs_attention", "completed", "aborted"];
const AGES = [["", "any age"], ["300", "updated in 5 min"], ["3600", "in 1 h"], ["86400", "in 24 h"]];

// What was asked for: the filters as last submitted (not as being typed) and the cursor of
// each page shown so far (the last is the current one).
let asked = { filters: {}, cursors: [null] };

export async function runs(view, _argument, fresh, current, refresh) {
  if (frame(view, fresh, () => runsFrame(refresh))) asked = { filters: {}, cursors: [null] };
  const { filters, cursors } = asked;
  const ageSeconds = Number(filters.age || 0);
  const params = {
    tenant: filters.tenant, principal: filters.principal, tool: filters.tool, state: filters.state,
    limit: filters.limit || "100", after: cursors[cursors.length - 1],
    since: ageSeconds ? new Date(Date.now() - ageSeconds * 1000).toISOString() : null,
  };
  const [counts, page] = await Promise.all([countsOf(params.tenant), api("/v1/runs" + query(params))]);
  if (!current()) return;
  if (changed("counts", counts)) {
    region("counts").replaceChildren(
      ...Object.entries(counts.runs).map(([s, n]) => el("span", { class: "count" }, stateCell(s), ` ${n} runs`)),
      ...Object.entries(counts.calls).map(([s, n]) => el("span", { class: "count" }, stateCell(s), ` ${n} calls`)));
  }
  if (changed("run-list", page.items)) {
    region("run-list").replaceChildren(
      table(["run", "tenant", "principal", "status", "calls", "stop reason", "updated"], page.items.map(runRow)));
  }
  refreshAges(region("run-list"));
  region("next-page").disabled = !page.next;
  region("next-page").dataset.next = page.next || "";
  region("first-page").disabled = cursors.length === 1;
  region("page-note").textContent = `page ${cursors.length}: ${page.items.length} runs, by run id`;
}

// Counting every run and call is a scan of both tables: every 15 s is live enough.
const COUNTS_MS = 15000;
let counted = { tenant: undefined, at: 0, value: null };

async function countsOf(tenant) {
  if (counted.tenant !== tenant || Date.now() - counted.at > COUNTS_MS) {
    counted = { tenant, at: Date.now(), value: await api("/v1/counts" + query({ tenant })) };
  }
  return counted.value;
}

function runsFrame(refresh) {
  const submit = (event) => {
    event.preventDefault();
    asked = { filters: Object.fromEntries(new FormData(region("run-filters"))), cursors: [null] };
    refresh();
  };
  return [
    el("h1", {}, "Runs"),
    el("div", { id: "counts", class: "counts" }),
    el("form", { id: "run-filters", class: "filters", onsubmit: submit },
      el("label", {}, "tenant", el("input", { name: "tenant", size: 10 })),
      el("label", {}, "principal", el("input", { name: "principal", size: 12 })),
      el("label", {}, "tool", el("input", { name: "tool", size: 14 })),
      el("label", {}, "state", el("select", { name: "state" }, el("option", { value: "" }, "any"),
        RUN_STATES.map((s) => el("option", { value: s }, s)))),
      el("label", {}, "age", el("select", { name: "age" }, AGES.map(([v, t]) => el("option", { value: v }, t)))),
      el("label", {}, "per page", el("select", { name: "limit" },
        ["100", "1000"].map((n) => el("option", { value: n }, n)))),
      el("button", { type: "submit" }, "Filter")),
    el("div", { id: "run-list" }),
    el("p", { class: "pager" },
      el("button", { type: "button", id: "first-page", onclick: () => { asked.cursors = [null]; refresh(); } }, "First page"),
      el("button", { type: "button", id: "next-page", onclick: () => { asked.cursors.push(region("next-page").dataset.next); refresh(); } }, "Next page"),
      el("span", { id: "page-note" })),
  ];
}

function runRow(run) {
  return el("tr", { "data-run": run.run_id },
    el("td", { class: "mono" }, el("a", { href: runLink(run.tenant_id, run.run_id) }, run.run_id)),
    el("td", {}, run.tenant_id), el("td", {}, run.principal_id), el("td", {}, stateCell(run.status)),
    el("td", {}, run.calls), el("td", {}, run.stop_reason || ""), ageCell(run.updated_at));
}
