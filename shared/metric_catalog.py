"""Every metric the services export, in one list: the instruments are created from it, the docs'
table and the dashboards' and alert rules' queries are checked against it.

A metric has two names: the OpenTelemetry instrument's (``relay.publish_lag``, what OTLP
carries) and the one Prometheus scrapes from ``/metrics`` (``relay_publish_lag_milliseconds``),
which the exporter derives by the OpenTelemetry ↔ Prometheus compatibility rules: dots become
underscores, the unit is appended (``ms`` → ``_milliseconds``, ``s`` → ``_seconds``; ``1`` and
``{annotations}`` add nothing), and counters end in ``_total``. ``prometheus`` reproduces those
rules so that the names are written down once; ``tests/unit/test_prometheus.py`` holds them to
what the exporter really serves.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from opentelemetry import metrics
from opentelemetry.metrics import CallbackT, Counter, Histogram, Meter, ObservableGauge

Kind = Literal["counter", "histogram", "gauge"]
_UNIT_SUFFIX = {"ms": "milliseconds", "s": "seconds", "1": ""}
_meter = metrics.get_meter("intentledger")
"""The global provider's: every instrument is a no-op until ``shared.telemetry`` installs it."""


@dataclass(frozen=True)
class Metric:
    name: str
    kind: Kind
    unit: str
    labels: tuple[str, ...]
    description: str

    @property
    def prometheus(self) -> str:
        """The metric family's name in the Prometheus exposition."""
        base = re.sub(r"[^a-zA-Z0-9:]+", "_", self.name)
        suffix = _UNIT_SUFFIX.get(self.unit, "" if self.unit.startswith("{") else self.unit)
        if suffix and not base.endswith(f"_{suffix}"):
            base = f"{base}_{suffix}"
        return f"{base}_total" if self.kind == "counter" else base

    @property
    def series(self) -> tuple[str, ...]:
        """The sample names a query can select."""
        if self.kind == "histogram":
            return tuple(f"{self.prometheus}_{part}" for part in ("bucket", "sum", "count"))
        return (self.prometheus,)


_DISPATCHER_COUNTS = {
    "attempts.sent": "Send attempts to a downstream (each retry is one).",
    "attempts.lookup": "Lookups of an unknown outcome by operation key (attempts too).",
    "intents": "Calls the dispatcher took over (one per intent).",
    "outcomes.unknown": "Attempts whose outcome became UNKNOWN (timeout, lost answer).",
    "reconciled": "Unknown outcomes reconciled to their truth by a lookup.",
    "manual_review": "Calls that went to MANUAL_REVIEW (a person must settle them).",
    "compensations.succeeded": "Compensations that completed.",
    "compensations.failed": "Compensations that failed (the saga needs a person).",
    "stale_writes": "Writes refused by the version check (another worker moved the call).",
    "resolutions": "Operator resolutions applied to unresolved calls.",
    "runs_cancelled": "Runs an operator cancelled, by the tool of the call whose step stopped the "
                      "run (a run with no call at the dispatcher yet is not counted).",
    "step_failures": "Steps that failed for a reason of their own (a bug, a row no step can "
                     "take) and were rolled back alone; the call is tried again with a growing "
                     "backoff. Must stay 0.",
    "irreversible_without_approval": "Sends of an approval-requiring tool without an approval "
                                     "in the capability: must stay 0.",
}

CATALOG: tuple[Metric, ...] = (
    Metric("consumer.applied", "counter", "{event}", ("consumer",),
       "Events applied by a consumer (counted after its transaction committed)."),
    Metric("consumer.duplicates_prevented", "counter", "{event}", ("consumer",),
       "Events delivered again (redelivery, republish) and not applied again."),
    Metric("consumer.dead_lettered", "counter", "{record}", ("consumer",),
       "Records a consumer could never apply, written to its dead_letters table."),
    Metric("consumer.delivery_latency", "histogram", "ms", ("consumer", "topic"),
       "From an event's creation (its producer's transaction) to its application by this "
       "consumer: one hop of the pipeline, relay and Kafka included."),
    Metric("consumer.lag", "gauge", "{record}", ("consumer_group", "topic", "partition"),
       "Records in the partition not yet applied by the group."),
    Metric("outbox.emitted", "counter", "{event}", ("schema", "topic", "event_type", "reason"),
       "Events a committed transaction wrote to an outbox, by type and reason code (a "
       "refusal's or denial's; empty when the event has none)."),
    Metric("relay.published", "counter", "{event}", (), "Outbox rows published to Kafka."),
    Metric("relay.parked", "counter", "{event}", (),
       "Outbox rows parked: Kafka refused them permanently (too large, no such topic)."),
    Metric("relay.publish_lag", "histogram", "ms", (),
       "From an outbox row's commit to Kafka's acknowledgement of it."),
    Metric("relay.batch_size", "histogram", "{event}", (), "Rows per relay batch."),
    Metric("relay.backlog", "gauge", "{event}", ("schema",), "Outbox rows not yet published."),
    *(Metric(f"dispatcher.{name}", "counter", "{event}", ("tool",), text)
      for name, text in _DISPATCHER_COUNTS.items()),
    Metric("dispatcher.retry_amplification", "gauge", "1", (),
       "Attempts per intent since the process started (lookups included)."),
    Metric("dispatcher.reconciliation_backlog", "gauge", "{call}", (),
       "Calls UNKNOWN or RECONCILING now."),
    Metric("dispatcher.unknown_outcome_age", "gauge", "s", (),
       "How long the oldest unresolved outcome has been unknown."),
    Metric("dispatcher.manual_review_waiting", "gauge", "{call}", (),
       "Calls in MANUAL_REVIEW now, waiting for a person."),
    Metric("dispatcher.calls_in_line", "gauge", "{call}", ("tool",),
       "Calls waiting in line now for a slot of their tool's max_in_flight (each bounded tool "
       "reports, 0 included)."),
    Metric("dispatcher.audit_drift", "counter", "{finding}", ("tool", "kind"),
       "Drift the settled-call audit found between the ledger and a downstream, counted once "
       "per finding when first found (docs/dispatch.md, The settled-call audit)."),
    Metric("intake.proposal_rate_exceeded", "counter", "{call}", ("tenant", "bucket"),
       "Proposed calls refused proposal_rate_exceeded, by tenant and by the bucket that was empty."),
    Metric("intake.operation_keys_expired", "counter", "{key}", ("tool",),
       "Intents reduced to a tombstone of their operation key past the tool's "
       "ledger_key_retention_seconds."),
)
BY_NAME = {metric.name: metric for metric in CATALOG}


def counter(name: str, meter: Meter = _meter) -> Counter:
    metric = BY_NAME[name]
    return meter.create_counter(metric.name, unit=metric.unit, description=metric.description)


def histogram(name: str, meter: Meter = _meter) -> Histogram:
    metric = BY_NAME[name]
    return meter.create_histogram(metric.name, unit=metric.unit, description=metric.description)


def gauge(name: str, callback: CallbackT, meter: Meter = _meter) -> ObservableGauge:
    metric = BY_NAME[name]
    return meter.create_observable_gauge(metric.name, callbacks=[callback], unit=metric.unit,
                                         description=metric.description)
