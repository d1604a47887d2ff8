"""The pipeline beside its floor (``bench.baselines.skeleton``: the same processes, runtime and
durability with no work in the hops), measured in the same run: how much of a proposal's CPU
and latency is the services' own work, and how far the runtime alone goes on this machine.

The skeleton runs at ``HEADLINE_RATE`` (the latency target's rate, where neither is short of
CPU), at the ramp's sustained rate and at ``TARGET_RATE`` (does the runtime alone sustain the
rate issue 22 asks of the pipeline, and at what CPU?). CPU per proposal is compared at
``HEADLINE_RATE`` only: once a stack uses every core, its CPU per proposal is the cores
divided by the rate, whatever its work (batches grow until it fits), so at a saturating rate
the two would agree by construction. What tells them apart there is the latency each needs to
fit, and the rate each sustains."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from bench.e2e.config import HEADLINE_RATE
from bench.e2e.steps import Step

TARGET_RATE = 200
"""Issue 22's sustained rate."""


def floor_rates(steps: Sequence[Step]) -> str:
    """The skeleton's rates, as ``bench.baselines.skeleton`` takes them."""
    sustained = [step.rate for step in steps
                 if step.phase == "ramp" and step.verdict and step.verdict["sustainable"]]
    return ",".join(map(str, sorted({HEADLINE_RATE, TARGET_RATE, *sustained[-1:]})))


def beside_floor(skeleton: dict[str, Any] | None, steps: Sequence[dict[str, Any]],
                 best: dict[str, Any] | None,
                 headline: dict[str, Any] | None) -> dict[str, Any] | None:
    """The floor's figures per rate, and the pipeline's as multiples of them where both ran
    at one rate: ``cpu_vs_floor`` (all processes but the load's, per settled proposal, in the
    ramp's ``HEADLINE_RATE`` step), ``p50_vs_floor`` (the headline p50),
    ``p50_vs_floor_at_sustained`` (the ramp's sustained step) and ``sustained_vs_floor``.
    None when the skeleton did not run."""
    if not skeleton or "steps" not in skeleton:
        return None
    by_rate = {step["rate_per_s"]: step for step in skeleton["steps"]}
    figures: dict[str, Any] = {
        "sustained_per_s": skeleton["sustained_per_s"],
        "per_rate": {rate: {"cpu_ms": step["cpu_ms_per_settled"]["all"],
                            "p50_ms": _rounded(step["p50_ms"]), "p99_ms": _rounded(step["p99_ms"]),
                            "sustained": step["sustained"]}
                     for rate, step in by_rate.items()},
        "cpu_vs_floor": None, "p50_vs_floor": None, "p50_vs_floor_at_sustained": None,
        "sustained_vs_floor": None}
    quiet = next((s for s in steps if s["phase"] == "ramp" and s["rate_per_s"] == HEADLINE_RATE),
                 None)
    if quiet and (floor := by_rate.get(HEADLINE_RATE)) and floor["cpu_ms_per_settled"]["all"] \
            and (pipeline := cpu_ms_per_settled(quiet)):
        figures["cpu_vs_floor"] = round(pipeline / floor["cpu_ms_per_settled"]["all"], 2)
    figures["p50_vs_floor"] = _p50_ratio(headline, by_rate)
    figures["p50_vs_floor_at_sustained"] = _p50_ratio(best, by_rate)
    if best and skeleton["sustained_per_s"]:
        figures["sustained_vs_floor"] = round(best["rate_per_s"] / skeleton["sustained_per_s"], 2)
    return figures


def cpu_ms_per_settled(step: dict[str, Any]) -> float:
    """All processes' CPU per settled proposal in a step, the load's own left out."""
    return sum(line["measured"] for name, line in step["budget"]["per_settled"].items()
               if name.endswith(" cpu_ms"))


def _p50_ratio(step: dict[str, Any] | None, by_rate: dict[int, dict[str, Any]]) -> float | None:
    if not step or not (floor := by_rate.get(step["rate_per_s"])) or not floor["p50_ms"] \
            or not step["settled_ms"]["p50"]:
        return None
    return round(step["settled_ms"]["p50"] / floor["p50_ms"], 2)


def _rounded(ms: float | None) -> float | None:
    """A step where nothing arrived has no percentiles."""
    return None if ms is None else round(ms, 2)
