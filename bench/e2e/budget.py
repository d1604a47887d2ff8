"""What one settled proposal may cost, per component, and what it did: the budget the pipeline
is held to at its sustained rate, so a run says which component is over, by how much, instead
of one CPU total.

CPU is milliseconds per proposal settled in the step's window, per process kind: PostgreSQL
(every backend), Kafka's JVM, and each Python service on its own (replicas of one service
count together: the budget is the service's, not a process's). Statements and commits are
PostgreSQL's own counters (``pg_stat_statements``, ``pg_stat_database``) per settled proposal.
The harness and the rest of the machine are outside the budget.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

CPU_MS = {"postgres": 4.0, "kafka": 1.5}
"""Per process kind other than Python services."""
PYTHON_SERVICE_CPU_MS = 1.5
STATEMENTS, COMMITS = 25.0, 6.0
OUTSIDE = frozenset({"harness"})


def step_budget(cpu: Mapping[str, Mapping[str, float]], kinds: Mapping[str, str],
                postgres: Mapping[str, float | None] | None, settled: int) -> dict[str, Any]:
    """Per component: its measured cost per settled proposal, its budget, and whether it is
    over; ``over`` lists the components over budget, worst ratio first."""
    lines: dict[str, dict[str, Any]] = {}
    if settled:
        for component, cpu_s in _cpu_by_component(cpu, kinds).items():
            budget = CPU_MS.get(component, PYTHON_SERVICE_CPU_MS)
            lines[f"{component} cpu_ms"] = _line(cpu_s * 1000 / settled, budget)
    for name, budget in (("statements", STATEMENTS), ("commits", COMMITS)):
        measured = (postgres or {}).get(name)
        if measured is not None:
            lines[name] = _line(measured, budget)
    over = sorted((name for name, line in lines.items() if line["over"]),
                  key=lambda name: -lines[name]["measured"] / lines[name]["budget"])
    return {"per_settled": lines, "over": over}


def _cpu_by_component(cpu: Mapping[str, Mapping[str, float]],
                      kinds: Mapping[str, str]) -> dict[str, float]:
    """CPU seconds per component: a service's replicas (``dispatcher#2``) fold into it."""
    by_component: dict[str, float] = {}
    for name, used in cpu.items():
        kind = kinds.get(name)
        if kind is None or name in OUTSIDE:
            continue  # the machine's rows, the harness
        component = kind if kind in CPU_MS else name.partition("#")[0]
        by_component[component] = by_component.get(component, 0.0) + used["cpu_s"]
    return by_component


def _line(measured: float, budget: float) -> dict[str, Any]:
    return {"measured": round(measured, 2), "budget": budget, "over": measured > budget}
