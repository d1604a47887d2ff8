"""The result of a run as written to ``e2e.json``: the headline figures (the sustained rate, the
latency phase's percentiles, the baselines beside them), the criteria and configuration, and
every step, process and check in detail."""

from __future__ import annotations

import os
import time
from datetime import datetime
from typing import TYPE_CHECKING, Any

from bench.e2e.config import HEADLINE_RATE
from bench.e2e.figures import OTHER, process_figures, step_figures
from bench.e2e.floor import beside_floor
from bench.e2e.pipeline import POLICY_FILE, ROOT, TOOLS_FILE
from bench.e2e.steps import STANDING_S

if TYPE_CHECKING:
    from bench.e2e.harness import Bench

OTHER_LOAD_WARNING_CORES = 0.15
"""Above this much CPU used by processes that are not the benchmark's, a step is flagged."""


def build_result(bench: Bench, *, began: float, durability: dict[str, Any],
                 hops: dict[str, Any], correctness: dict[str, Any], baselines: dict[str, Any],
                 cpu_end: dict[str, float], peaks: dict[str, int | None]) -> dict[str, Any]:
    config = bench.config
    steps = [step_figures(step, hops, bench.proposals, bench.timeline, bench.meter)
             for step in bench.steps]
    bench.warnings.extend(_other_load_warnings(steps))
    best = _sustained(steps, "ramp")
    on_history = _sustained(steps, "history")
    headline = next((s for s in steps if s["phase"] == "latency"), None) or \
        min(steps, key=lambda s: abs(s["rate_per_s"] - HEADLINE_RATE), default=None)
    client_step = next((s for s in steps if s["phase"] == "client"), None)
    through_client = (client_step or {}).get("client_ms") or {}
    processes = process_figures(bench.meter, bench.timeline, cpu_end, peaks)
    measured_total = sum(p["cpu_s"] for n, p in processes.items() if n != "harness")
    python_services = {n: p["peak_rss_mb"] for n, p in processes.items()
                       if bench.meter.kinds.get(n) == "python" and n != "harness"}
    result = {
        "benchmark": "end-to-end",
        "passed": correctness["passed"] and not bench.problems,
        "cores": os.cpu_count(),
        "sustained_proposals_per_s": best["rate_per_s"] if best else None,
        "sustained_settled_per_s": best["settled_per_s"] if best else None,
        "p50_ms": headline and headline["settled_ms"]["p50"],
        "p95_ms": headline and headline["settled_ms"]["p95"],
        "p99_ms": headline and headline["settled_ms"]["p99"],
        "max_ms": headline and headline["settled_ms"]["max"],
        "accepted_p50_ms": headline and headline["accepted_ms"]["p50"],
        "accepted_p99_ms": headline and headline["accepted_ms"]["p99"],
        "latency_at_rate_per_s": headline and headline["rate_per_s"],
        "latency_phase_sustainable": headline and headline["sustainable"],
        "client_p50_ms": through_client.get("p50"),
        "client_p99_ms": through_client.get("p99"),
        "client_at_rate_per_s": client_step and client_step["rate_per_s"],
        "headline_step": headline and headline["index"],
        "pace_ms": headline and headline["pace_ms"]["p50"],
        "dbos_workflows_per_s": baselines.get("dbos_workflows_per_s"),
        "pgbench_tps": baselines.get("pgbench_tps"),
        "baselines": baselines,
        "budget_at_sustained": best and best["budget"],
        "history": bench.history,
        "sustained_on_history_per_s": on_history["rate_per_s"] if on_history else None,
        "history_vs_fresh": round(on_history["rate_per_s"] / best["rate_per_s"], 2)
        if on_history and best else None,
        "sustained_vs_dbos": round(best["rate_per_s"] / baselines["dbos_workflows_per_s"], 2)
        if best and baselines.get("dbos_workflows_per_s") else None,
        "hop_floor_ms": baselines.get("hop_floor_ms"),
        "p50_vs_hop_floor": round(headline["settled_ms"]["p50"] / baselines["hop_floor_ms"], 1)
        if headline and headline["settled_ms"]["p50"] and baselines.get("hop_floor_ms")
        else None,
        "floor": beside_floor((baselines.get("details") or {}).get("skeleton"), steps, best,
                              headline),
        "max_python_service_rss_mb": max(python_services.values(), default=None),
        "events_per_cpu_s": round(correctness["ledger_events_published"] / measured_total, 1)
        if measured_total else None,
        "proposals_per_cpu_s": round(len(bench.proposals) / measured_total, 2) if measured_total
        else None,
        "criteria": {"max_p99_ms": config.max_p99_ms,
                     "max_backlog_s": config.max_backlog_s,
                     "standing_s": STANDING_S,
                     "abort_backlog_s": config.abort_backlog_s,
                     "grace_s": config.grace_s,
                     "rule": "sustainable: p99 of the step's second half (unsettled = late) "
                             "within max_p99_ms, the least backlog of its last standing_s within "
                             "max_backlog_s of its rate, and the generator kept up"},
        "config": {"rates": config.rates, "step_s": config.step_s, "preload": config.preload,
                   "calls_per_run": config.calls_per_run,
                   "active_runs": config.active_runs, "wallets": config.wallets,
                   "tenants": config.tenants,
                   "formats": config.formats, "replicas": config.replicas,
                   "signed": not config.unsigned,
                   "env": config.env, "policy": str(POLICY_FILE.relative_to(ROOT)),
                   "tools": str(TOOLS_FILE.relative_to(ROOT)), "nonce": bench.names.nonce},
        "durability": durability,
        "steps": steps,
        "hops": hops["hops"],
        "processes": processes,
        "processes_not_measured": dict(bench.meter.notes),
        "correctness": correctness,
        "profiles": bench.profiler.profiles,
        "transactions": bench.transactions.summaries,
        "postgres_statements_most_called": bench.most_called,
        "postgres_time": bench.postgres_time,
        "problems": bench.problems,
        "warnings": bench.warnings,
        "started_at": datetime.fromtimestamp(began).astimezone().isoformat(timespec="seconds"),
        "elapsed_s": round(time.time() - began, 1),
        "logs": bench.stack.logs(),
    }
    result["passed"] = bool(result["passed"])
    return result


def _sustained(steps: list[dict[str, Any]], phase: str) -> dict[str, Any] | None:
    """The highest sustainable step of a ramp (``ramp``: the fresh ledger's; ``history``: the
    ramp again after ``--preload``)."""
    sustainable = [s for s in steps if s["sustainable"] and s["phase"] == phase]
    return max(sustainable, key=lambda s: s["offered_per_s"], default=None)


def _other_load_warnings(steps: list[dict[str, Any]]) -> list[str]:
    """A warning for each step during which processes that are not the benchmark's used more
    than ``OTHER_LOAD_WARNING_CORES``."""
    warnings = []
    for step in steps:
        other = step["cpu"].get(OTHER, {}).get("cores", 0.0)
        if other > OTHER_LOAD_WARNING_CORES:
            warnings.append(
                f"{step['phase']} {step['rate_per_s']}/s: other processes used {other:.2f} "
                "cores of the machine during the step; its figures are lower than this "
                "stack alone would reach")
    return warnings
