"""Dispatcher metrics (docs/design.md §8): attempts per intent (retry amplification), UNKNOWN
outcomes, reconciliations, calls needing a person, resolutions, compensations, stale writes
refused.

Counted only after the transaction that decided them has committed, so a rolled-back step
counts nothing. Exported through OpenTelemetry; ``snapshot`` serves tests and the CLI.
"""

from __future__ import annotations

from collections import Counter

from opentelemetry import metrics
from opentelemetry.metrics import CallbackOptions, Observation

_meter = metrics.get_meter("intentledger.dispatcher")

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
IRREVERSIBLE_UNAPPROVED = "irreversible_without_approval"
"""Sends of a tool that requires approval without one in the capability: must stay 0."""


class DispatcherMetrics:
    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()
        self._counters = {name: _meter.create_counter(f"dispatcher.{name}", unit="{event}")
                          for name in (ATTEMPT_SENT, ATTEMPT_LOOKUP, INTENT, OUTCOME_UNKNOWN,
                                       RECONCILED, MANUAL_REVIEW, COMPENSATION_SUCCEEDED,
                                       COMPENSATION_FAILED, STALE_WRITE, RESOLUTION,
                                       IRREVERSIBLE_UNAPPROVED)}
        self.unresolved = 0
        self.oldest_unresolved_s = 0.0
        _meter.create_observable_gauge("dispatcher.retry_amplification", unit="1",
                                       callbacks=[self._observe_amplification])
        _meter.create_observable_gauge(
            "dispatcher.reconciliation_backlog", unit="{call}",
            callbacks=[lambda _: [Observation(self.unresolved)]],
            description="Calls UNKNOWN or RECONCILING now.")
        _meter.create_observable_gauge(
            "dispatcher.unknown_outcome_age", unit="s",
            callbacks=[lambda _: [Observation(self.oldest_unresolved_s)]],
            description="How long the oldest unresolved outcome has been unknown.")

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
