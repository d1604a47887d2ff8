// Building the page from data. Text reaches the DOM only as text nodes (el) or attribute
// values (setAttribute): nothing the ledger stores is ever parsed as markup.

const SVG = "http://www.w3.org/2000/svg";

export function el(tag, attrs = {}, ...children) {
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

export function svg(tag, attrs = {}) {
  const node = document.createElementNS(SVG, tag);
  for (const [name, value] of Object.entries(attrs)) node.setAttribute(name, String(value));
  return node;
}

export function table(headings, rows) {
  return el("table", {}, el("thead", {}, el("tr", {}, headings.map((h) => el("th", {}, h)))),
    el("tbody", {}, rows));
}

export function stateCell(state) {
  return el("span", { class: `state state-${state}` }, state);
}

export function short(id) {
  return id ? String(id).slice(0, 13) + "…" : "-";
}

function seconds(value) {
  if (value < 90) return `${Math.round(value)} s`;
  if (value < 5400) return `${Math.round(value / 60)} min`;
  if (value < 172800) return `${(value / 3600).toFixed(1)} h`;
  return `${Math.round(value / 86400)} d`;
}

export function age(iso) {
  return iso ? seconds(Math.max(0, (Date.now() - Date.parse(iso)) / 1000)) : "-";
}

export function region(id) {
  return document.getElementById(id);
}

// A view builds its frame once (fresh) and replaces only its data regions on refresh, so
// forms and filters being edited are never thrown away by the live refresh.
export function frame(view, fresh, build) {
  if (!fresh && view.firstChild && view.dataset.frame === location.hash) return false;
  view.replaceChildren(...build());
  view.dataset.frame = location.hash;
  return true;
}

// Whether a region's data differ from what it shows: an unchanged region is left alone, so
// the refresh neither steals a click nor rebuilds 1,000 rows for nothing.
const shown = new Map();
export function changed(id, data) {
  const text = JSON.stringify(data);
  if (shown.get(id) === text && region(id)?.firstChild) return false;
  shown.set(id, text);
  return true;
}

// An age cell names its instant (data-at); every refresh rewrites its text in place, so ages
// stay true without redrawing the rows they are in.
export function ageCell(iso) {
  return el("td", { class: "age", "data-at": iso }, age(iso));
}

export function refreshAges(root) {
  for (const cell of root.querySelectorAll("[data-at]")) cell.textContent = age(cell.dataset.at);
}
