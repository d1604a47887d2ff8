"""Draw ``deploy/grafana/intentledger-pipeline.json`` from a Prometheus that scraped a real run.

Not Grafana's pixels: each panel's own queries (Grafana's ``$__rate_interval`` and ``$__range``
filled in as Grafana would for this scrape interval and time range) are asked of Prometheus'
``query_range`` API and drawn with matplotlib at the panel's place on the dashboard's 24-column
grid, legends from the panels' ``legendFormat``. What is drawn is what the dashboard would
show; a query that returns nothing is drawn as an empty panel saying so.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import aiohttp

DASHBOARD = Path(__file__).resolve().parents[2] / "deploy" / "grafana" / "intentledger-pipeline.json"
COLUMNS = 24
ROW_INCHES = 0.3
LEGEND_MOST = 10
"""Series named in a panel's legend; the rest are counted (those at 0 first left out)."""


@dataclass(frozen=True)
class Series:
    label: str
    times: list[float]
    values: list[float]


async def query_panels(prometheus: str, start: datetime, end: datetime, scrape_s: float,
                       dashboard: Path = DASHBOARD) -> list[dict[str, Any]]:
    """Every panel with its series over ``[start, end]``."""
    panels = json.loads(dashboard.read_text())["panels"]
    step = max(scrape_s, (end - start).total_seconds() / 300)
    fill = {"$__rate_interval": f"{int(max(4 * scrape_s, step + scrape_s))}s",
            "$__range": f"{int((end - start).total_seconds())}s"}
    async with aiohttp.ClientSession() as session:
        for panel in panels:
            panel["series"] = []
            for target in panel.get("targets", []):
                expr = target["expr"]
                for name, value in fill.items():
                    expr = expr.replace(name, value)
                async with session.get(f"{prometheus}/api/v1/query_range", params={
                        "query": expr, "start": start.timestamp(), "end": end.timestamp(),
                        "step": step}) as response:
                    answer = await response.json()
                if answer.get("status") != "success":
                    raise RuntimeError(f"{panel['title']}: {expr}: {answer}")
                panel["series"] += [_series(result, target.get("legendFormat", ""))
                                    for result in answer["data"]["result"]]
    return panels


def _series(result: dict[str, Any], legend: str) -> Series:
    labels = result["metric"]
    label = re.sub(r"\{\{\s*(\w+)\s*\}\}", lambda m: labels.get(m[1], ""), legend) or \
        ",".join(f"{k}={v}" for k, v in sorted(labels.items())) or "value"
    points = [(float(t), float(v)) for t, v in result["values"] if v not in ("NaN", "+Inf", "-Inf")]
    return Series(label, [t for t, _ in points], [v for _, v in points])


def draw(panels: list[dict[str, Any]], out: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = max(p["gridPos"]["y"] + p["gridPos"]["h"] for p in panels)
    figure = plt.figure(figsize=(16, rows * ROW_INCHES + 0.6))
    figure.suptitle(title, fontsize=12, x=0.01, ha="left")
    height = rows * ROW_INCHES + 0.6
    for panel in panels:
        grid = panel["gridPos"]
        left, width = grid["x"] / COLUMNS, grid["w"] / COLUMNS
        top = 1 - (0.6 + grid["y"] * ROW_INCHES) / height
        box = grid["h"] * ROW_INCHES / height
        axes = figure.add_axes((left + 0.035, top - box + 0.035, width - 0.05, box - 0.07))
        axes.set_title(panel["title"], fontsize=8, loc="left")
        axes.tick_params(labelsize=6)
        series = [s for s in panel["series"] if s.times]
        if panel.get("type") == "stat":
            text = "\n".join(f"{s.label}: {s.values[-1]:g}" for s in series) or "no data"
            axes.text(0.5, 0.5, text, ha="center", va="center", fontsize=11)
            axes.set_axis_off()
            continue
        if not series:
            axes.text(0.5, 0.5, "no data in this run", ha="center", va="center", fontsize=8,
                      color="grey")
        origin = min((s.times[0] for s in series), default=0.0)
        named = sorted(series, key=lambda s: max(s.values) == 0)[:LEGEND_MOST]
        for s in series:
            axes.plot([t - origin for t in s.times], s.values, linewidth=1,
                      label=s.label if s in named else None)
        axes.set_xlabel("seconds into the run", fontsize=6)
        if series:
            unnamed = len(series) - len(named)
            axes.legend(fontsize=5, loc="upper left", ncol=2,
                        title=f"and {unnamed} more series, all 0" if unnamed and all(
                            max(s.values) == 0 for s in series if s not in named) else
                        f"and {unnamed} more series" if unnamed else None, title_fontsize=5)
    figure.savefig(out, dpi=110)
    plt.close(figure)


def summary(panels: list[dict[str, Any]]) -> dict[str, Any]:
    """Per panel: each series' label, points and largest value (what the picture shows)."""
    return {panel["title"]: [{"series": s.label, "points": len(s.values),
                              "max": max(s.values, default=None)} for s in panel["series"]]
            for panel in panels}
