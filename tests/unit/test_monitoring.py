"""The alert rules and the Grafana dashboards, offline: promtool checks the rules and runs
their unit tests (tests/data/alerts.test.yaml: which series fire which alert and which must
not), every dashboard is valid JSON whose queries promtool parses, and every query — rules and
dashboards — names only metrics the services export (``shared.metric_catalog``), event types
that exist and reason codes of the catalog."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from shared import metric_catalog
from shared.contracts import authorizations, dispatch
from shared.messaging.reason_catalog import reason_codes
from tests.support.monitoring import (DASHBOARDS, RULE_TESTS, dashboard_queries, rule_groups,
                                      rule_queries)
from tests.support.promql import label_values, metric_names

EXPORTED = {series for metric in metric_catalog.CATALOG for series in metric.series}
GRAFANA_RANGES = {"$__rate_interval": "5m", "$__range": "1h", "$__interval": "1m"}

needs_promtool = pytest.mark.skipif(
    shutil.which("promtool") is None,
    reason="promtool is not installed: scripts/system-packages test (Debian's prometheus)")


def promtool(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(["promtool", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=120, check=False)


@pytest.mark.tooling
@needs_promtool
def test_promtool_accepts_the_rules_and_their_unit_tests_pass(tmp_path):
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump({"groups": rule_groups()}))
    shutil.copy(RULE_TESTS, tmp_path / "alerts.test.yaml")
    checked = promtool("check", "rules", "rules.yaml", cwd=tmp_path)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    tested = promtool("test", "rules", "alerts.test.yaml", cwd=tmp_path)
    assert tested.returncode == 0, tested.stdout + tested.stderr


@pytest.mark.tooling
@needs_promtool
def test_a_broken_threshold_fails_the_rule_tests(tmp_path):
    """The unit tests can fail: an alert that no longer fires on its incident is reported."""
    groups = rule_groups()
    for group in groups:
        for rule in group["rules"]:
            rule["expr"] = rule["expr"].replace("> 0", "> 1000000").replace("> 600", "> 600000")
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump({"groups": groups}))
    shutil.copy(RULE_TESTS, tmp_path / "alerts.test.yaml")
    tested = promtool("test", "rules", "alerts.test.yaml", cwd=tmp_path)
    assert tested.returncode != 0
    for alert in ("IntentLedgerUnknownOutcomeOld", "IntentLedgerDeadLetters",
                  "IntentLedgerCapabilityVerificationFailed", "IntentLedgerManualReviewWaiting"):
        assert f"alertname: {alert}," in tested.stdout + tested.stderr


def test_every_alert_the_issue_asks_for_exists_and_is_tested():
    alerts = set(rule_queries())
    assert {"IntentLedgerUnknownOutcomeOld", "IntentLedgerManualReviewWaiting",
            "IntentLedgerConsumerLagGrowing", "IntentLedgerDeadLetters", "IntentLedgerRelayBacklog",
            "IntentLedgerCapabilityVerificationFailed"} <= alerts
    tested = {case["alertname"] for test in yaml.safe_load(RULE_TESTS.read_text())["tests"]
              for case in test["alert_rule_test"]}
    assert alerts == tested, f"alerts without a unit test: {alerts - tested}"


@pytest.mark.tooling
@needs_promtool
def test_promtool_parses_every_dashboard_query(tmp_path):
    """Each query as a recording rule, Grafana's range variables replaced by durations."""
    rules = []
    for where, expr in dashboard_queries().items():
        for variable, duration in GRAFANA_RANGES.items():
            expr = expr.replace(variable, duration)
        rules.append({"record": f"dashboard:query{len(rules)}", "expr": expr})
        assert "$" not in expr, f"{where}: an unknown Grafana variable in {expr}"
    (tmp_path / "queries.yaml").write_text(yaml.safe_dump({"groups": [{"name": "q", "rules": rules}]}))
    checked = promtool("check", "rules", "queries.yaml", cwd=tmp_path)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_every_query_names_only_exported_metrics():
    queries = {**dashboard_queries(), **rule_queries()}
    assert DASHBOARDS and len(queries) > 20
    for where, expr in queries.items():
        names = metric_names(expr)
        assert names, f"{where}: no metric in {expr}"
        assert names <= EXPORTED, f"{where}: {names - EXPORTED} is not exported"


def test_every_event_type_and_reason_a_query_selects_exists():
    event_types = {authorizations.AUTHORIZATION_DENIED, *dispatch.DISPATCH_EVENTS}
    codes = set(reason_codes())
    for where, expr in {**dashboard_queries(), **rule_queries()}.items():
        assert label_values(expr, "event_type") <= event_types, where
        assert label_values(expr, "reason") <= codes, where


def test_the_dashboards_cover_what_operators_watch():
    used = set().union(*(metric_names(expr) for expr in dashboard_queries().values()))
    for needed in ("consumer_applied_total", "consumer_delivery_latency_milliseconds_bucket",
                   "relay_publish_lag_milliseconds_bucket", "dispatcher_unknown_outcome_age_seconds",
                   "dispatcher_attempts_sent_total", "relay_backlog", "consumer_lag",
                   "consumer_dead_lettered_total", "outbox_emitted_total"):
        assert needed in used


def test_the_metric_name_reader_sees_through_matchers_and_grouping():
    expr = ('sum by (consumer) (rate(made_up_total{consumer="x", le="+Inf"}[5m])) / '
            'on (job) group_left sum(rate(consumer_applied_total[$__rate_interval]))')
    assert metric_names(expr) == {"made_up_total", "consumer_applied_total"}
    assert not {"made_up_total"} <= EXPORTED
    assert label_values('x{reason=~"capability_(a|b)"}', "reason") == {"capability_a", "capability_b"}
