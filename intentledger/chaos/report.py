"""What a scenario found (``Report``), and how a person reads it after ``intentledger chaos run``,
or a program with ``--json``."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

from intentledger.chaos.assertions import Verdict


@dataclass
class FaultRecord:
    id: str
    kind: str
    fired_at_s: float | None = None
    detail: str = ""


@dataclass
class Report:
    name: str
    path: str
    guards: str
    seed: int
    nonce: str
    run_ids: dict[str, str] = field(default_factory=dict)
    faults: list[FaultRecord] = field(default_factory=list)
    verdicts: list[Verdict] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    """What may have disturbed the scenario without proving it wrong."""
    problems: list[str] = field(default_factory=list)
    """Why the scenario cannot count, apart from assertions: a fault that never fired, no
    quiescence, a service that died unasked, an error of the runner."""
    quiescence: str = ""
    elapsed_s: float = 0.0
    logs: dict[str, str] = field(default_factory=dict)
    facts: dict[str, Any] = field(default_factory=dict)
    """Everything measured at the end, the evidence behind the verdicts (``--json``)."""

    @property
    def passed(self) -> bool:
        return not self.problems and all(v.holds for v in self.verdicts)


def text(report: Report) -> str:
    runs = ", ".join(f"{name}={run_id}" for name, run_id in report.run_ids.items())
    lines = [f"== {report.name} ({report.path})", f"   guards: {report.guards}",
             f"   seed {report.seed}, nonce {report.nonce}, {report.elapsed_s} s; runs: {runs}"]
    if report.faults:
        lines.append("   faults:")
        for fault in report.faults:
            when = ("NEVER FIRED" if fault.fired_at_s is None else
                    "fired" if fault.fired_at_s < 0 else f"fired at {fault.fired_at_s:.2f} s")
            lines.append(f"     {fault.id:<24} {fault.kind:<9} {when}: {fault.detail}")
    lines.append(f"   {report.quiescence}")
    for verdict in report.verdicts:
        mark = "ok  " if verdict.holds else "FAIL"
        lines.append(f"   {mark} {verdict.subject} {verdict.expected}: measured "
                     f"{_short(verdict.measured)}" + (f"  ({verdict.why})" if verdict.why else ""))
    for warning in report.warnings:
        lines.append(f"   warning: {warning}")
    for problem in report.problems:
        lines.append(f"   PROBLEM {problem}")
    if not report.passed:
        lines.append("   logs: " + ", ".join(f"{name} {path}" for name, path in report.logs.items()))
    lines.append(f"   {'PASSED' if report.passed else 'FAILED'}")
    return "\n".join(lines)


def as_json(reports: list[Report]) -> str:
    return json.dumps([asdict(r) | {"passed": r.passed} for r in reports], indent=2, default=str)


def _short(value: Any) -> str:
    shown = json.dumps(value, default=str) if not isinstance(value, str) else value
    return shown if len(shown) <= 160 else shown[:157] + "..."
