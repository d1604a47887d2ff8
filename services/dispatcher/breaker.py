"""A circuit breaker per dependency (docs/design.md §5.6), in the memory of one dispatcher process.

After ``threshold`` consecutive failures (no answer, unknown, transient) the dependency is
open: attempts are postponed, not spent, until ``cooldown`` has passed; then one probe is let
through (half-open), and its answer closes or re-opens the breaker. A probe whose answer never
comes back (its step rolled back, its worker lost the run) is replaced by another after a
further cool-down, so the breaker cannot stay shut for ever. Any confirmed answer —
applied, rejected, not found — proves the dependency is reachable and closes it.

Per process, not shared: each replica learns a dependency's health from its own attempts,
which is what it needs to stop adding load; no coordination can then fail.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta


@dataclass
class _Circuit:
    failures: int = 0
    open_until: datetime | None = None
    probe_sent_at: datetime | None = None


@dataclass
class Breakers:
    threshold: int
    cooldown: timedelta
    _circuits: dict[str, _Circuit] = field(default_factory=dict)

    def closed_at(self, dependency: str, now: datetime) -> datetime | None:
        """None when an attempt may go now; else when to look again."""
        circuit = self._circuits.get(dependency)
        if circuit is None or circuit.open_until is None:
            return None
        if now < circuit.open_until:
            return circuit.open_until
        if circuit.probe_sent_at is not None and now < circuit.probe_sent_at + self.cooldown:
            return circuit.probe_sent_at + self.cooldown
        circuit.probe_sent_at = now
        return None

    def succeeded(self, dependency: str) -> None:
        self._circuits.pop(dependency, None)

    def failed(self, dependency: str, now: datetime) -> None:
        circuit = self._circuits.setdefault(dependency, _Circuit())
        circuit.failures += 1
        circuit.probe_sent_at = None
        if circuit.failures >= self.threshold:
            circuit.open_until = now + self.cooldown

    def is_open(self, dependency: str, now: datetime) -> bool:
        circuit = self._circuits.get(dependency)
        return bool(circuit and circuit.open_until and now < circuit.open_until)
