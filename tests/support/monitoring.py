"""The alert rules and the dashboards as the tests read them: the ``PrometheusRule``'s groups,
and every query of every dashboard in ``deploy/grafana/``."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "k8s" / "base" / "monitoring" / "prometheus-rules.yaml"
RULE_TESTS = ROOT / "tests" / "data" / "alerts.test.yaml"
DASHBOARDS = sorted((ROOT / "deploy" / "grafana").glob("*.json"))


def rule_groups() -> list[dict]:
    rule = yaml.safe_load(RULES.read_text())
    assert (rule["apiVersion"], rule["kind"]) == ("monitoring.coreos.com/v1", "PrometheusRule")
    return rule["spec"]["groups"]


def dashboard_queries() -> dict[str, str]:
    """``dashboard / panel / refId`` → expression."""
    queries = {}
    for path in DASHBOARDS:
        dashboard = json.loads(path.read_text())
        for panel in dashboard["panels"]:
            assert panel["targets"], f"{path.name}: panel {panel['title']!r} has no query"
            for target in panel["targets"]:
                queries[f"{path.name} / {panel['title']} / {target['refId']}"] = target["expr"]
    return queries


def rule_queries() -> dict[str, str]:
    return {rule["alert"]: rule["expr"] for group in rule_groups() for rule in group["rules"]}
