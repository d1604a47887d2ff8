// Health over the last hour, as small SVG line charts (colours are SVG attributes: the
// content security policy allows no inline style).

import { api, session } from "./api.js";
import { changed, el, frame, region, svg } from "./dom.js";

const CHARTS = [
  ["relay_backlog", "Relay backlog (pending outbox rows)"],
  ["consumer_lag", "Consumer lag (records behind)"],
  ["retry_amplification", "Retry amplification (attempts per call)"],
  ["duplicates_prevented", "Duplicates prevented"],
  ["compensations", "Compensations (outcomes)"],
];
const COLOURS = ["#0b5cad", "#cf222e", "#1a7f37", "#9a6700", "#8250df", "#57606a", "#bc4c00"];
const LINES = 6;

export async function health(view, _argument, fresh, current) {
  frame(view, fresh, () => [el("h1", {}, "Health, last hour"), el("div", { id: "charts", class: "charts" })]);
  if (session.me.tenant !== "*") {
    region("charts").replaceChildren(el("p", {}, "Health is for operators (every tenant): ask for an operator token."));
    return;
  }
  const report = await api("/v1/health");
  if (!current() || !changed("charts", report.series)) return;
  const now = Date.now();
  const from = now - report.window_s * 1000;
  region("charts").replaceChildren(...CHARTS.map(([name, title]) =>
    chart(title, report.series.filter((s) => s.name === name), from, now)));
}

function swatch(colour) {
  const box = svg("svg", { width: 10, height: 10, class: "swatch" });
  box.append(svg("rect", { width: 10, height: 10, fill: colour }));
  return box;
}

// The total first, then the largest series; the rest are counted, not drawn.
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
    const colour = COLOURS[index % COLOURS.length];
    const points = s.points.map((p) => [((Date.parse(p.at) - from) / (to - from)) * width,
      height - 2 - (p.value / max) * (height - 6)]);
    plot.append(points.length > 1
      ? svg("polyline", { points: points.map(([x, y]) => `${x.toFixed(1)},${y.toFixed(1)}`).join(" "),
        fill: "none", stroke: colour, "stroke-width": 1.5 })
      : svg("circle", { cx: points[0][0], cy: points[0][1], r: 2.5, fill: colour }));
  });
  const legend = series.length
    ? series.map((s, index) => el("span", {}, swatch(COLOURS[index % COLOURS.length]),
      ` ${s.subject}: ${s.points.length ? Number(s.points[s.points.length - 1].value.toFixed(2)) : "-"} ${s.unit}  `))
    : ["no data in the last hour"];
  const hidden = all.length - series.length;
  return el("div", { class: "chart", "data-series": title }, el("h3", {}, title), plot,
    el("div", { class: "legend" }, `max ${Number(max.toFixed(2))} · `, legend, hidden > 0 ? `+${hidden} smaller` : ""));
}
