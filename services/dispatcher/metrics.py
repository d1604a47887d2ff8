"""Dispatcher metrics (docs/design.md §8): attempts per intent (retry amplification), UNKNOWN
outcomes, reconciliations, calls needing a person, calls in line for a bounded tool,
resolutions, cancellations, compensations, stale writes refused, steps that failed.

Counted only after the transaction that decided them has committed, so a rolled-back step
counts nothing. Each counter starts at 0 for every tool the registry names (``start_at_zero``): Prometheus'
``increase()`` sees a series' first sample as its start, so a counter born at 1 would never
fire an alert on its first incident. Exported through OpenTelemetry (``shared.metric_catalog``);
``counts`` serves tests and the CLI.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from opentelemetry.metrics import CallbackOptions, Observation

from shared import metric_catalog as catalog

ATTEMPT_SENT = "attempts.sent"
ATTEMPT_LOOKUP = "attempts.lookup"
INTENT = "intents"
OUTCOME_UNKNOWN = "outcomes.unknown"
RECONCILED = "reconciled"
MANUAL_REVIEW = "manual_review"
COMPENSATION_SUCCEEDED = "compensations.succeeded"
COMPENSATION_FAILED = "compensations.failed"
STALE_WRITE = "stale_writes"
RESOLUTION = "resolutions"
RUN_CANCELLED = "runs_cancelled"
STEP_FAILURE = "step_failures"
IRREVERSIBLE_UNAPPROVED = "irreversible_without_approval"
"""Sends of a tool that requires approval without one in the capability: must stay 0."""


class DispatcherMetrics:
    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()
        self._counters = {name: catalog.counter(f"dispatcher.{name}")
                          for name in (ATTEMPT_SENT, ATTEMPT_LOOKUP, INTENT, OUTCOME_UNKNOWN,
                                       RECONCILED, MANUAL_REVIEW, COMPENSATION_SUCCEEDED,
                                       COMPENSATION_FAILED, STALE_WRITE, RESOLUTION,
                                       RUN_CANCELLED, STEP_FAILURE, IRREVERSIBLE_UNAPPROVED)}
        self.unresolved = 0
        self.oldest_unresolved_s = 0.0
        self.awaiting_review = 0
        self.in_line: dict[str, int] = {}
        """Calls in line per bounded tool (``capacity.py``), every bounded tool present."""
        catalog.gauge("dispatcher.retry_amplification", self._observe_amplification)
        catalog.gauge("dispatcher.reconciliation_backlog",
                      lambda _: [Observation(self.unresolved)])
        catalog.gauge("dispatcher.unknown_outcome_age",
                      lambda _: [Observation(self.oldest_unresolved_s)])
        catalog.gauge("dispatcher.manual_review_waiting",
                      lambda _: [Observation(self.awaiting_review)])
        catalog.gauge("dispatcher.calls_in_line",
                      lambda _: [Observation(calls, {"tool": tool})
                                 for tool, calls in self.in_line.items()])

    def start_at_zero(self, tools: Iterable[str]) -> None:
        """Every counter's series for each of ``tools``, at 0. Only once the process's meter
        provider is configured: an addition made before it is dropped, so the series would be
        born at its first incident after all."""
        for tool in tools:
            for instrument in self._counters.values():
                instrument.add(0, {"tool": tool})

    def add(self, name: str, tool: str) -> None:
        self.counts[name] += 1
        self._counters[name].add(1, {"tool": tool})

    @property
    def retry_amplification(self) -> float:
        """attempts / intents (docs/design.md §5.6); lookups are attempts too."""
        calls = self.counts[INTENT]
        return (self.counts[ATTEMPT_SENT] + self.counts[ATTEMPT_LOOKUP]) / calls if calls else 0.0

    def _observe_amplification(self, _: CallbackOptions):
        return [Observation(self.retry_amplification)]
