// The operator console: a page over the query API (/v1), refreshed by polling.
// Everything the ledger stores (tool results, receipts, reasons, evidence) is untrusted text:
// it reaches the page only through text nodes (el() below), never as markup, and the content
// security policy forbids inline script on top of that.

const REFRESH_MS = 3000;
const SVG = "http://www.w3.org/2000/svg";
const MACHINE = [
  ["VALIDATED", "AWAITING_APPROVAL", "AUTHORIZED", "INTENT_RECORDED", "DISPATCHING"],
  ["UNKNOWN", "RECONCILING", "MANUAL_REVIEW"],
  ["SUCCEEDED", "FAILED", "DENIED", "EXPIRED"],
  ["COMPENSATING", "COMPENSATED", "COMPENSATION_FAILED"],
];
const UNRESOLVED = new Set(["UNKNOWN", "RECONCILING", "MANUAL_REVIEW"]);
// The intake's and the policy's events name no dispatcher state; these are the states they mean.
const STATE_OF_EVENT = {
  ProposalAccepted: "VALIDATED", ApprovalRequested: "AWAITING_APPROVAL",
  AuthorizationAllowed: "AUTHORIZED", AuthorizationDenied: "DENIED",
};

let me = null;
let timer = null;
let renderToken = 0;

// -- DOM ------------------------------------------------------------------------------------

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === null || value === undefined || value === false) continue;
    if (name === "class") node.className = value;
    else if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else node.setAttribute(name, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function svg(tag, attrs = {}) {
  const node = document.createElementNS(SVG, tag);
  for (const [name, value] of Object.entries(attrs)) node.setAttribute(name, String(value));
  return node;
}

function stateCell(state) {
  return el("span", { class: `state state-${state}` }, state);
}

function short(id) {
  return id ? String(id).slice(0, 13) + "…" : "-";
}

function age(iso) {
  if (!iso) return "-";
  const seconds = Math.max(0, (Date.now() - Date.parse(iso)) / 1000);
  if (seconds < 90) return `${Math.round(seconds)} s`;
  if (seconds < 5400) return `${Math.round(seconds / 60)} min`;
  if (seconds < 172800) return `${(seconds / 3600).toFixed(1)} h`;
  return `${Math.round(seconds / 86400)} d`;
}

function seconds(value) {
  return value < 90 ? `${Math.round(value)} s` : value < 5400 ? `${Math.round(value / 60)} min`
    : `${(value / 3600).toFixed(1)} h`;
}

function table(headings, rows) {
  return el("table", {}, el("thead", {}, el("tr", {}, headings.map((h) => el("th", {}, h)))),
    el("tbody", {}, rows));
}

// -- API ------------------------------------------------------------------------------------

class ApiError extends Error {
  constructor(status, body) {
    super(body?.error?.message || `HTTP ${status}`);
    this.status = status;
    this.code = body?.error?.code;
  }
}

async function api(path, options = {}) {
  const response = await fetch(path, { credentials: "same-origin", ...options });
  const body = await response.json().catch(() => null);
  if (!response.ok) throw new ApiError(response.status, body);
  return body;
}

function post(path, body) {
  return api(path, {
    method: "POST", body: JSON.stringify(body),
    headers: { "Content-Type": "application/json", "X-CSRF-Token": me?.csrf_token || "" },
  });
}

function query(params) {
  const search = new URLSearchParams();
  for (const [name, value] of Object.entries(params)) {
    for (const item of [].concat(value)) if (item) search.append(name, item);
  }
  const text = search.toString();
  return text ? `?${text}` : "";
}

async function allPages(path, params, cap = 20) {
  const items = [];
  let after = null;
  for (let page = 0; page < cap; page++) {
    const answer = await api(path + query({ ...params, after }));
    items.push(...answer.items);
    if (!answer.next) break;
    after = answer.next;
  }
  return items;
}

// -- sign in --------------------------------------------------------------------------------

async function start() {
  document.getElementById("sign-in-form").addEventListener("submit", signIn);
  document.getElementById("sign-out").addEventListener("click", signOut);
  window.addEventListener("hashchange", () => show(true));
  try {
    me = await api("/console/api/me");
  } catch (error) {
    if (error.status !== 401) throw error;
    me = null;
  }
  show(true);
}

async function signIn(event) {
  event.preventDefault();
  const error = document.getElementById("sign-in-error");
  error.textContent = "";
  try {
    await post("/console/session", { token: document.getElementById("token").value });
    me = await api("/console/api/me");
    document.getElementById("token").value = "";
    show(true);
  } catch (problem) {
    error.textContent = problem.message;
  }
}

async function signOut() {
  await post("/console/session/end", {}).catch(() => null);
  me = null;
  show(true);
}

// -- routing and refresh --------------------------------------------------------------------

function route() {
  const [, view = "runs", ...rest] = location.hash.split("/");
  return { view: view || "runs", argument: rest.length ? decodeURIComponent(rest.join("/")) : null };
}

function show(fresh) {
  clearTimeout(timer);
  const signedIn = me !== null;
  document.getElementById("sign-in").hidden = signedIn;
  document.getElementById("nav").hidden = !signedIn;
  document.getElementById("sign-out").hidden = !signedIn || me.proxy;
  document.getElementById("who").textContent = signedIn
    ? `${me.operator_id} · ${me.tenant === "*" ? "every tenant" : `tenant ${me.tenant}`}` : "";
  const view = document.getElementById("view");
  if (!signedIn) {
    view.replaceChildren();
    return;
  }
  const { view: name, argument } = route();
  for (const link of document.querySelectorAll("#nav a")) {
    link.classList.toggle("current", link.dataset.view === name);
  }
  const render = { runs: argument ? timeline : runs, unknown: unknownQueue, health }[name] || runs;
  const token = ++renderToken;
  render(view, argument, fresh)
    .then(() => {
      document.getElementById("refreshed").textContent = `refreshed ${new Date().toLocaleTimeString()}`;
    })
    .catch((error) => {
      if (error.status === 401) {
        me = null;
        show(true);
        return;
      }
      document.getElementById("refreshed").textContent = `refresh failed: ${error.message}`;
    })
    .finally(() => {
      if (token === renderToken && me !== null) timer = setTimeout(() => show(false), REFRESH_MS);
    });
}

// A view builds its frame once (fresh) and replaces only its data regions on refresh, so
// forms and filters being edited are never thrown away by the live refresh.
function frame(view, fresh, build) {
  if (fresh || !view.firstChild || view.dataset.frame !== location.hash) {
    view.replaceChildren(...build());
    view.dataset.frame = location.hash;
  }
}

function region(id) {
  return document.getElementById(id);
}

// Whether a region's data differ from what it shows: an unchanged region is left alone, so
// the refresh neither steals a click nor rebuilds 1,000 rows for nothing. Ages shown in it
// are redrawn at least once a minute.
const shown = new Map();
function changed(id, data) {
  const text = JSON.stringify(data) + Math.floor(Date.now() / 60000);
  if (shown.get(id) === text && region(id)?.firstChild) return false;
  shown.set(id, text);
  return true;
}

// -- runs -----------------------------------------------------------------------------------

const RUN_STATES = ["running", "needs_attention", "completed", "aborted"];
let runCursors = [null];  // the cursor of each page shown so far; the last is the current one
const AGES = [["", "any age"], ["300", "updated in 5 min"], ["3600", "in 1 h"], ["86400", "in 24 h"]];

async function runs(view, _argument, fresh) {
  frame(view, fresh, () => [
    el("h1", {}, "Runs"),
    el("div", { id: "counts", class: "counts" }),
    el("form", { id: "run-filters", class: "filters", onsubmit: (e) => { e.preventDefault(); runCursors = [null]; show(false); } },
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
      el("button", { type: "button", id: "first-page", onclick: () => { runCursors = [null]; show(false); } }, "First page"),
      el("button", { type: "button", id: "next-page", onclick: () => { runCursors.push(region("next-page").dataset.next); show(false); } }, "Next page"),
      el("span", { id: "page-note" })),
  ]);
  const form = new FormData(region("run-filters"));
  const ageSeconds = Number(form.get("age") || 0);
  const params = {
    tenant: form.get("tenant"), principal: form.get("principal"), tool: form.get("tool"),
    state: form.get("state"), limit: form.get("limit") || "100", after: runCursors[runCursors.length - 1],
    since: ageSeconds ? new Date(Date.now() - ageSeconds * 1000).toISOString() : null,
  };
  const [counts, page] = await Promise.all([
    api("/v1/counts" + query({ tenant: params.tenant })), api("/v1/runs" + query(params))]);
  if (changed("counts", counts)) region("counts").replaceChildren(
    ...Object.entries(counts.runs).map(([s, n]) => el("span", { class: "count" }, stateCell(s), ` ${n} runs`)),
    ...Object.entries(counts.calls).map(([s, n]) => el("span", { class: "count" }, stateCell(s), ` ${n} calls`)));
  const rows = () => page.items.map((run) => el("tr", { "data-run": run.run_id },
    el("td", { class: "mono" }, el("a", { href: `#/runs/${encodeURIComponent(run.run_id)}` }, run.run_id)),
    el("td", {}, run.tenant_id), el("td", {}, run.principal_id), el("td", {}, stateCell(run.status)),
    el("td", {}, run.calls), el("td", {}, run.stop_reason || ""), el("td", {}, age(run.updated_at))));
  if (changed("run-list", page.items)) {
    region("run-list").replaceChildren(
      table(["run", "tenant", "principal", "status", "calls", "stop reason", "updated"], rows()));
  }
  region("next-page").disabled = !page.next;
  region("next-page").dataset.next = page.next || "";
  region("first-page").disabled = runCursors.length === 1;
  region("page-note").textContent = `page ${runCursors.length}: ${page.items.length} runs, by run id`;
}

// -- one run's timeline ---------------------------------------------------------------------

async function timeline(view, runId, fresh) {
  frame(view, fresh, () => [
    el("p", {}, el("a", { href: "#/runs" }, "← runs")),
    el("h1", {}, "Run ", el("span", { class: "mono" }, runId)),
    el("div", { id: "run-summary" }),
    el("div", { id: "run-calls" }),
  ]);
  const [detail, events] = await Promise.all([
    api(`/v1/runs/${encodeURIComponent(runId)}`),
    allPages(`/v1/runs/${encodeURIComponent(runId)}/timeline`, { limit: 1000 })]);
  if (!changed("run-calls", [detail, events])) return;
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

function eventTable(events) {
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

// -- the UNKNOWN queue and the resolve form -------------------------------------------------

async function unknownQueue(view, callId, fresh) {
  frame(view, fresh, () => [
    el("h1", {}, "UNKNOWN queue"),
    el("p", {}, "Calls whose outcome nobody knows yet (UNKNOWN, RECONCILING) and calls waiting for a person (MANUAL_REVIEW), oldest first."),
    el("div", { id: "unknown-list" }),
    el("div", { id: "resolve-panel" }),
  ]);
  const [unknown, review] = await Promise.all([
    allPages("/v1/unknown", { limit: 1000 }, 5), allPages("/v1/manual-review", { limit: 1000 }, 5)]);
  const calls = [...unknown, ...review];
  const rows = () => calls.map((call) => el("tr", { "data-call": call.logical_call_id },
    el("td", { class: "mono" }, el("a", { href: `#/runs/${encodeURIComponent(call.run_id)}` }, call.run_id)),
    el("td", { class: "mono" }, short(call.logical_call_id)), el("td", {}, call.tenant_id),
    el("td", {}, call.tool_name || ""), el("td", {}, stateCell(call.state)),
    el("td", {}, call.age_seconds !== undefined ? seconds(call.age_seconds) : age(call.updated_at)),
    el("td", {}, call.attempts), el("td", {}, call.reason || ""),
    el("td", {}, el("a", { href: `#/unknown/${call.logical_call_id}`, class: "resolve-link" }, "resolve…"))));
  const ages = calls.map((call) => Math.floor((call.age_seconds || 0) / 60));  // redraw per minute
  if (changed("unknown-list", [calls.map((call) => ({ ...call, age_seconds: null })), ages])) {
    region("unknown-list").replaceChildren(calls.length
      ? table(["run", "call", "tenant", "tool", "state", "unknown for", "attempts", "reason", ""], rows())
      : el("p", {}, "Nothing is unknown. Every call has an outcome."));
  }
  const panel = region("resolve-panel");
  if (!callId) {
    panel.replaceChildren();
  } else if (panel.dataset.call !== callId) {
    panel.dataset.call = callId;
    panel.replaceChildren(await resolvePanel(callId));
  }
}

async function resolvePanel(callId) {
  const call = await api(`/v1/calls/${callId}`);
  const events = (await allPages(`/v1/runs/${encodeURIComponent(call.run_id)}/timeline`, { limit: 1000 }))
    .filter((e) => e.logical_call_id === callId);
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
    el("button", { type: "submit" }, `Resolve as ${me.operator_id}`));
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
    el("p", {}, "The dispatcher applies the repair only if the policy's repair rules name you for this tenant and tool, and only while the call is unresolved; your identity and reason are recorded in the run's history."),
    form, verdict);
}

async function submitResolution(event, call, form, verdict) {
  event.preventDefault();
  const data = new FormData(form);
  verdict.textContent = "sent; waiting for the dispatcher's verdict…";
  verdict.className = "verdict";
  let result = null;
  try {
    const text = String(data.get("result") || "").trim();
    result = text ? JSON.parse(text) : null;
  } catch (problem) {
    verdict.textContent = `result fields are not JSON: ${problem.message}`;
    verdict.className = "verdict error";
    return;
  }
  try {
    const answer = await post(`/console/api/calls/${call.logical_call_id}/resolution`, {
      outcome: data.get("outcome"), reason: data.get("reason"), evidence: data.get("evidence"),
      receipt_id: data.get("receipt_id") || null, result,
    });
    verdict.textContent = `${answer.status}: the call is ${answer.state}${answer.reason ? ` (${answer.reason})` : ""}`;
    verdict.className = `verdict ${answer.status === "applied" ? "state-SUCCEEDED" : "error"}`;
    verdict.dataset.status = answer.status;
  } catch (problem) {
    verdict.textContent = `refused: ${problem.message}`;
    verdict.className = "verdict error";
    verdict.dataset.status = "error";
  }
}

// -- health ---------------------------------------------------------------------------------

const CHARTS = [
  ["relay_backlog", "Relay backlog (pending outbox rows)"],
  ["consumer_lag", "Consumer lag (records behind)"],
  ["retry_amplification", "Retry amplification (attempts per call)"],
  ["duplicates_prevented", "Duplicates prevented"],
  ["compensations", "Compensations (outcomes)"],
];
const COLOURS = ["#0b5cad", "#cf222e", "#1a7f37", "#9a6700", "#8250df", "#57606a", "#bc4c00"];

async function health(view, _argument, fresh) {
  frame(view, fresh, () => [el("h1", {}, "Health, last hour"), el("div", { id: "charts", class: "charts" })]);
  if (me.tenant !== "*") {
    region("charts").replaceChildren(el("p", {}, "Health is for operators (every tenant): ask for an operator token."));
    return;
  }
  const report = await api("/v1/health");
  const now = Date.now();
  const from = now - report.window_s * 1000;
  if (!changed("charts", report.series)) return;
  region("charts").replaceChildren(...CHARTS.map(([name, title]) =>
    chart(title, report.series.filter((s) => s.name === name), from, now)));
}

// Colours as SVG attributes: the content security policy allows no inline style.
function swatch(colour) {
  const box = svg("svg", { width: 10, height: 10, class: "swatch" });
  box.append(svg("rect", { width: 10, height: 10, fill: colour }));
  return box;
}

const LINES = 6;

function chart(title, all, from, to) {
  const biggest = (s) => Math.max(...s.points.map((p) => p.value));
  const series = [...all].sort((a, b) => (b.subject === "all") - (a.subject === "all") || biggest(b) - biggest(a))
    .slice(0, LINES);
  const width = 320;
  const height = 90;
  const max = Math.max(1, ...series.flatMap((s) => s.points.map((p) => p.value)));
  const plot = svg("svg", { viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": title, class: "plot" });
  plot.append(svg("line", { x1: 0, y1: height - 1, x2: width, y2: height - 1, stroke: "#d8dee4" }));
  series.forEach((s, index) => {
    const points = s.points.map((p) => {
      const x = ((Date.parse(p.at) - from) / (to - from)) * width;
      const y = height - 2 - (p.value / max) * (height - 6);
      return `${x.toFixed(1)},${y.toFixed(1)}`;
    });
    plot.append(svg(points.length > 1 ? "polyline" : "circle", points.length > 1
      ? { points: points.join(" "), fill: "none", stroke: COLOURS[index % COLOURS.length], "stroke-width": 1.5 }
      : { cx: points[0]?.split(",")[0] || 0, cy: points[0]?.split(",")[1] || 0, r: 2.5, fill: COLOURS[index % COLOURS.length] }));
  });
  const legend = series.length
    ? series.map((s, index) => el("span", {}, swatch(COLOURS[index % COLOURS.length]),
      ` ${s.subject}: ${s.points.length ? Number(s.points[s.points.length - 1].value.toFixed(2)) : "-"} ${s.unit}  `))
    : ["no data in the last hour"];
  const hidden = all.length - series.length;
  return el("div", { class: "chart", "data-series": title }, el("h3", {}, title), plot,
    el("div", { class: "legend" }, `max ${Number(max.toFixed(2))} · `, legend,
      hidden > 0 ? `+${hidden} smaller` : ""));
}

start();
