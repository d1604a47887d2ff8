"""The figures of the result: per step (throughput, latency, backlog, CPU and memory while it
ran) and per process over the whole run (CPU seconds, peak memory)."""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

from bench.e2e.budget import step_budget
from bench.e2e.meter import Meter
from bench.e2e.pipeline import GROUP_TOPICS
from bench.e2e.proposals import Proposals
from bench.e2e.statements import per_settled
from bench.e2e.stats import summary
from bench.e2e.steps import Step

MACHINE = "machine (all processes)"
OTHER = "other processes"
"""Rows of a step's CPU beside the processes under test: the whole machine, and what of it was
not the benchmark's."""


def step_figures(step: Step, hops: dict[str, Any], proposals: Proposals,
                 timeline: list[dict[str, Any]], meter: Meter) -> dict[str, Any]:
    indices = range(step.first, step.last)
    duration = max(step.ended - step.started, 1e-9)
    settled = sorted(x for x in (proposals.latency_ms(i) for i in indices) if not math.isnan(x))
    accepted = sorted((proposals.t_acc[i] - proposals.t_pub[i]) * 1000 for i in indices
                      if not math.isnan(proposals.t_acc[i]))
    through_client = sorted(x for x in (proposals.client_ms(i) for i in indices)
                            if not math.isnan(x))
    in_window = _settled_between(proposals, step.started, step.ended)
    samples = [s for s in timeline if step.started <= s["t"] <= step.ended]
    cpu = _step_cpu(samples)
    services_cpu = sum(v["cpu_s"] for n, v in cpu.items() if n not in ("harness", MACHINE, OTHER))
    statuses = Counter(proposals.status[i] or "unsettled" for i in indices)
    lag_max = {group: max((s["lag"][group] for s in samples), default=0)
               for group in GROUP_TOPICS}
    count = step.last - step.first
    postgres = per_settled(samples[0], samples[-1], _settled_between(
        proposals, samples[0]["t"], samples[-1]["t"])) if len(samples) > 1 else None
    return {
        "index": step.index, "phase": step.phase, "rate_per_s": step.rate,
        "planned_s": step.planned_s,
        "duration_s": round(duration, 2), "proposals": count,
        "offered_per_s": round(count / duration, 1),
        "settled_per_s": round(in_window / duration, 1),
        "sustainable": bool(step.verdict and step.verdict["sustainable"]),
        "verdict": step.verdict, "stop_reason": step.stop_reason, "profiled": step.profiled,
        "generator_lag_ms": summary(step.generator_lag_ms),
        "settled_ms": summary(settled), "accepted_ms": summary(accepted),
        "client_ms": summary(through_client) if through_client else None,
        "client_statuses": dict(Counter(proposals.client_status[i] for i in indices
                                        if i in proposals.client_status)),
        "unsettled": count - len(settled), "statuses": dict(statuses),
        "hops_ms": hops["per_step"].get(str(step.index), {}),
        "lag_max": lag_max,
        "outbox_pending_max": max((sum(s["outbox_pending"].values()) for s in samples),
                                  default=0),
        "dispatcher_due_max": max((s["dispatcher_due"] for s in samples), default=0),
        "backlog_max": max((s["backlog"] for s in samples), default=0),
        "first_backlog_to_grow": _first_backlog_to_grow(step, samples),
        "cpu": cpu,
        "proposals_per_cpu_s": round(count / services_cpu, 2) if services_cpu else None,
        "postgres_per_settled": postgres,
        "budget": step_budget(cpu, meter.kinds, postgres, _settled_between(
            proposals, samples[0]["t"], samples[-1]["t"]) if len(samples) > 1 else 0),
        "pace_ms": summary([s["pace_ms"] for s in samples if s.get("pace_ms") is not None]),
        "rss_max_mb": {name: _mb(max((s["rss"].get(name, 0) for s in samples), default=0))
                       for name in meter.processes},
    }


def _settled_between(proposals: Proposals, start: float, end: float) -> int:
    return sum(1 for t in proposals.t_set if start <= t < end)


def _step_cpu(samples: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """CPU seconds and cores each process used between the step's first and last sample, the
    whole machine's, and the rest of the machine's."""
    cpu: dict[str, dict[str, float]] = {}
    if len(samples) < 2:
        return cpu
    span = samples[-1]["t"] - samples[0]["t"]
    for name, used in samples[-1]["cpu_s"].items():
        delta = used - samples[0]["cpu_s"].get(name, used)
        cpu[name] = {"cpu_s": round(delta, 2), "cores": round(delta / span, 3)}
    machine = samples[-1]["machine_busy_s"] - samples[0]["machine_busy_s"]
    ours = sum(v["cpu_s"] for v in cpu.values())
    cpu[MACHINE] = {"cpu_s": round(machine, 2), "cores": round(machine / span, 3)}
    # Anything else on the machine (another benchmark, a build) competes for the cores.
    cpu[OTHER] = {"cpu_s": round(machine - ours, 2), "cores": round((machine - ours) / span, 3)}
    return cpu


def _first_backlog_to_grow(step: Step, samples: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The first sample of the step in which some backlog passed half a second of its rate
    (at least 100), and which ones: where the pipeline falls behind first."""
    for sample in samples:
        grown = [g for g, n in sample["lag"].items() if n > max(100, step.rate * 0.5)]
        if sample["dispatcher_due"] > max(100, step.rate * 0.5):
            grown.append("dispatcher (calls due)")
        if grown:
            return {"t_into_step_s": round(sample["t"] - step.started, 1), "groups": grown}
    return None


def process_figures(meter: Meter, timeline: list[dict[str, Any]], cpu_end: dict[str, float],
                    peaks: dict[str, int | None]) -> dict[str, dict[str, Any]]:
    """Per process: CPU seconds from the first sample to the end of the run, and peak memory
    (the kernel's high-water mark where there is one, else the largest sample)."""
    sampled_peak: dict[str, int] = {}
    for sample in timeline:
        for name, value in sample["rss"].items():
            sampled_peak[name] = max(sampled_peak.get(name, 0), value)
    first = timeline[0]["cpu_s"] if timeline else {}
    processes = {}
    for name in meter.processes:
        processes[name] = {
            "cpu_s": round(cpu_end.get(name, 0.0) - first.get(name, 0.0), 2),
            "peak_rss_mb": _mb(peaks.get(name) or sampled_peak.get(name)),
            "peak_rss_source": "VmHWM (kernel high-water mark)" if peaks.get(name) else
            ("largest 1 s sample of private memory plus the largest shared set"
             if meter.kinds.get(name) == "postgres"
             else "largest 1 s sample of the RSS"),
        }
    return processes


def _mb(value: int | None) -> float | None:
    return round(value / 2**20, 1) if value else None
