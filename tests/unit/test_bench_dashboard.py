"""The dashboard drawing (``bench/dashboard/render.py``): legends from the panels' own
``legendFormat``, missing samples left out, every panel placed, a panel without data saying so."""

from __future__ import annotations

import json

from bench.dashboard.render import DASHBOARD, _series, draw, summary


def test_a_series_is_named_by_its_legend_format_and_drops_samples_prometheus_could_not_compute():
    result = {"metric": {"consumer": "policy", "le": "+Inf"},
              "values": [[1.0, "3"], [2.0, "NaN"], [3.0, "4.5"]]}
    series = _series(result, "p99 {{consumer}}")
    assert (series.label, series.times, series.values) == ("p99 policy", [1.0, 3.0], [3.0, 4.5])
    assert _series({"metric": {}, "values": []}, "").label == "value"


def test_every_panel_of_the_shipped_dashboard_is_drawn(tmp_path):
    panels = json.loads(DASHBOARD.read_text())["panels"]
    for n, panel in enumerate(panels):
        panel["series"] = [] if n % 2 else [_series(
            {"metric": {"consumer": "relay"}, "values": [[0, "1"], [5, "2"]]}, "{{consumer}}")]
    out = tmp_path / "dashboard.png"
    draw(panels, out, "a test")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    drawn = summary(panels)
    assert set(drawn) == {panel["title"] for panel in panels}
    assert drawn[panels[0]["title"]] == [{"series": "relay", "points": 2, "max": 2.0}]
