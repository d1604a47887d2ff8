"""Relay metrics: OpenTelemetry instruments plus a snapshot the CLI and benchmarks can read."""

from __future__ import annotations

from dataclasses import dataclass, field

from opentelemetry.metrics import CallbackOptions, Observation

from shared import metric_catalog as catalog


@dataclass
class RelayMetrics:
    published: int = 0
    parked: int = 0
    batches: int = 0
    backlog: dict[str, int] = field(default_factory=dict)
    publish_lag_ms: list[float] = field(default_factory=list)
    """Kept for the benchmark; bounded by ``keep_lag_samples``."""
    keep_lag_samples: int = 200_000

    def __post_init__(self) -> None:
        self._published = catalog.counter("relay.published")
        self._parked = catalog.counter("relay.parked")
        self._lag = catalog.histogram("relay.publish_lag")
        self._batch = catalog.histogram("relay.batch_size")
        catalog.gauge("relay.backlog", self._observe_backlog)

    def record_batch(self, lags_ms: list[float], parked: int) -> None:
        self.batches += 1
        self.published += len(lags_ms)
        self.parked += parked
        self._published.add(len(lags_ms))
        self._parked.add(parked)
        self._batch.record(len(lags_ms) + parked)
        for lag in lags_ms:
            self._lag.record(lag)
        room = self.keep_lag_samples - len(self.publish_lag_ms)
        if room > 0:
            self.publish_lag_ms.extend(lags_ms[:room])

    def _observe_backlog(self, _: CallbackOptions):
        return [Observation(count, {"schema": schema}) for schema, count in self.backlog.items()]
