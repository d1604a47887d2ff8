// The operator console: sign-in, routing between the views, and the live refresh (polling).
// Everything the ledger stores (tool results, receipts, reasons, evidence) is untrusted text:
// it reaches the page only through text nodes (dom.js), never as markup, and the content
// security policy forbids inline script on top of that.

import { api, ApiError, post, session } from "./api.js";
import { health } from "./health.js";
import { runs } from "./runs.js";
import { timeline } from "./timeline.js";
import { unknownQueue } from "./unknown.js";

const REFRESH_MS = 3000;
let timer = null;
let renderToken = 0;

async function start() {
  document.getElementById("sign-in-form").addEventListener("submit", signIn);
  document.getElementById("sign-out").addEventListener("click", signOut);
  window.addEventListener("hashchange", () => show(true));
  try {
    session.me = await api("/console/api/me");
  } catch (error) {
    if (!(error instanceof ApiError) || error.status !== 401) throw error;
  }
  show(true);
}

async function signIn(event) {
  event.preventDefault();
  const error = document.getElementById("sign-in-error");
  error.textContent = "";
  try {
    await post("/console/session", { token: document.getElementById("token").value });
    session.me = await api("/console/api/me");
    document.getElementById("token").value = "";
    show(true);
  } catch (problem) {
    error.textContent = problem.message;
  }
}

async function signOut() {
  await post("/console/session/end", {}).catch(() => null);
  session.me = null;
  show(true);
}

// `#/<view>/<part>/…`, each part encoded on its own, so a "/" inside an id never splits it:
// `#/runs/<tenant>/<run>` (a run is named by its tenant and id: two tenants may share an id),
// `#/unknown/<call>`.
function route() {
  const [, view = "runs", ...rest] = location.hash.split("/");
  return { view: view || "runs", argument: rest.map(decodeURIComponent) };
}

// Render the current view; `fresh` rebuilds its frame. A render that a newer one has replaced
// (navigation, a submitted filter) writes nothing when its answers arrive late: `current`.
function show(fresh) {
  clearTimeout(timer);
  const me = session.me;
  document.getElementById("sign-in").hidden = me !== null;
  document.getElementById("nav").hidden = me === null;
  document.getElementById("sign-out").hidden = me === null || me.proxy;
  document.getElementById("who").textContent = me
    ? `${me.operator_id} · ${me.tenant === "*" ? "every tenant" : `tenant ${me.tenant}`}` : "";
  const view = document.getElementById("view");
  if (me === null) {
    view.replaceChildren();
    return;
  }
  const { view: name, argument } = route();
  for (const link of document.querySelectorAll("#nav a")) {
    link.classList.toggle("current", link.dataset.view === name);
  }
  const render = { runs: argument.length === 2 ? timeline : runs, unknown: unknownQueue, health }[name] || runs;
  const token = ++renderToken;
  const current = () => token === renderToken;
  render(view, argument, fresh, current, () => show(false))
    .then(() => {
      if (current()) document.getElementById("refreshed").textContent = `refreshed ${new Date().toLocaleTimeString()}`;
    })
    .catch((error) => {
      if (error.status === 401) {
        session.me = null;
        show(true);
        return;
      }
      document.getElementById("refreshed").textContent = `refresh failed: ${error.message}`;
    })
    .finally(() => {
      if (current() && session.me !== null) timer = setTimeout(() => show(false), REFRESH_MS);
    });
}

start();
