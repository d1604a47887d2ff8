"""The Prometheus exposition against the catalog: every metric the services create, recorded
once through the real exporter, is served under exactly the name, type and unit
``shared.metric_catalog`` documents; ``/metrics`` on the health port serves it; OTLP, when on,
does not take the exposition's place."""

from __future__ import annotations

from pathlib import Path

import aiohttp
import pytest
from opentelemetry import metrics
from opentelemetry.metrics import Observation
from opentelemetry.sdk.metrics import MeterProvider
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from shared import metric_catalog as catalog
from shared.health import Health, HealthSettings, serving
from shared.messaging.emitted import reason_of
from shared.telemetry import TelemetrySettings, providers


def _record_every_metric(meter) -> None:
    for metric in catalog.CATALOG:
        labels = dict.fromkeys(metric.labels, "x")
        if metric.kind == "counter":
            catalog.counter(metric.name, meter).add(1, labels)
        elif metric.kind == "histogram":
            catalog.histogram(metric.name, meter).record(12.5, labels)
        else:
            catalog.gauge(metric.name, lambda _, labels=labels: [Observation(3, labels)], meter)


@pytest.fixture
def exposition(monkeypatch):
    monkeypatch.delenv("INTENTLEDGER_OTLP", raising=False)
    registry = CollectorRegistry()
    tracer_provider, meter_provider = providers("dispatcher", TelemetrySettings(), registry)
    yield registry, meter_provider
    meter_provider.shutdown()
    tracer_provider.shutdown()


def test_every_catalogued_metric_is_served_under_its_documented_name(exposition):
    registry, meter_provider = exposition
    _record_every_metric(meter_provider.get_meter("test"))
    text = generate_latest(registry).decode()
    samples = {line.split("{")[0].split(" ")[0] for line in text.splitlines()
               if line and not line.startswith("#")}
    for metric in catalog.CATALOG:
        assert set(metric.series) <= samples, f"{metric.name}: {metric.series} not in {sorted(samples)}"
        assert f"# TYPE {metric.prometheus} {metric.kind}" in text
        for label in metric.labels:
            assert f'{label}="x"' in text
    catalogued = {series for metric in catalog.CATALOG for series in metric.series}
    assert samples - catalogued == {"target_info"}, "an exported metric the catalog does not list"


def test_the_names_follow_the_prometheus_conventions():
    assert catalog.BY_NAME["relay.publish_lag"].prometheus == "relay_publish_lag_milliseconds"
    assert catalog.BY_NAME["dispatcher.unknown_outcome_age"].prometheus == \
        "dispatcher_unknown_outcome_age_seconds"
    assert catalog.BY_NAME["dispatcher.attempts.sent"].prometheus == "dispatcher_attempts_sent_total"
    assert catalog.BY_NAME["dispatcher.retry_amplification"].prometheus == \
        "dispatcher_retry_amplification"
    assert catalog.BY_NAME["consumer.lag"].series == ("consumer_lag",)


def test_every_metric_has_a_unit_and_a_description():
    assert len({metric.prometheus for metric in catalog.CATALOG}) == len(catalog.CATALOG)
    for metric in catalog.CATALOG:
        assert metric.unit and metric.description.endswith("."), metric.name


async def test_the_health_port_serves_the_exposition(monkeypatch):
    """What the process's registry holds, served at /metrics: the provider a service process
    installed, if this process has one already (an in-process test ran a service before),
    else one of its own; counted as what this test adds to it."""
    monkeypatch.delenv("INTENTLEDGER_OTLP", raising=False)
    installed = metrics.get_meter_provider()
    own = None if isinstance(installed, MeterProvider) else providers("relay", TelemetrySettings())
    meter_provider = installed if own is None else own[1]
    try:
        async with serving(Health("relay"), HealthSettings(port=0)) as port, \
                aiohttp.ClientSession() as session:
            async def scrape() -> str:
                async with session.get(f"http://127.0.0.1:{port}/metrics") as response:
                    assert response.status == 200
                    assert response.headers["Content-Type"].startswith("text/plain; version=")
                    return await response.text()
            before = _published(await scrape())
            catalog.counter("relay.published", meter_provider.get_meter("test")).add(7)
            text = await scrape()
    finally:
        if own is not None:
            own[1].shutdown()
            own[0].shutdown()
    assert _published(text) - before == 7
    target = next(family for family in text_string_to_metric_families(text)
                  if family.name in ("target", "target_info"))
    assert target.samples[0].labels["service_name"]


def _published(text: str) -> float:
    return sum(sample.value for family in text_string_to_metric_families(text)
               if family.name == "relay_published" for sample in family.samples
               if sample.name.endswith("_total"))


def test_a_reason_label_is_a_catalogued_code_or_nothing():
    assert reason_of({"reason_code": "capability_signature_invalid"}) == "capability_signature_invalid"
    assert reason_of({"reason": "run_aborted"}) == "run_aborted"
    assert reason_of({"reason": "the wallet said: insufficient funds for 4000"}) == "other"
    assert reason_of({"reason_code": None, "amount": 3}) == ""


def test_the_operators_documentation_lists_every_metric():
    text = (Path(__file__).resolve().parents[2] / "docs" / "deploy.md").read_text()
    for metric in catalog.CATALOG:
        assert f"| `{metric.prometheus}` | {metric.kind} |" in text, metric.prometheus
