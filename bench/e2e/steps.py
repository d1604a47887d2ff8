"""A step of the run (one offered rate for a while) and the verdict on it: was that rate
sustainable?"""

from __future__ import annotations

import asyncio
import math
from dataclasses import dataclass, field
from typing import Any

from bench.e2e.config import Config
from bench.e2e.proposals import Proposals
from bench.e2e.stats import quantile

STANDING_S = 5.0
"""How long a backlog must stand at a step's end to count: ten offset-commit intervals."""


@dataclass
class Step:
    index: int
    rate: int
    planned_s: float
    started: float = 0.0
    """Wall clock (epoch seconds), comparable with PostgreSQL's timestamps on this host."""
    ended: float = 0.0
    first: int = 0
    """Index of the step's first proposal; ``last`` is one past its last."""
    last: int = 0
    stop: asyncio.Event = field(default_factory=asyncio.Event)
    stop_reason: str | None = None
    generator_lag_ms: list[float] = field(default_factory=list)
    verdict: dict[str, Any] | None = None
    profiled: bool = False
    phase: str = "ramp"
    """``latency``: the fixed-rate phase the headline p50/p99 come from; ``ramp``: a step of the
    search for the sustainable maximum."""


def judge(step: Step, proposals: Proposals, timeline: list[dict[str, Any]],
          config: Config) -> dict[str, Any]:
    """Sustainable: the p99 of the proposals published in the step's second half (unsettled ones
    infinitely late) within ``max_p99_ms``, the backlog at its end (``standing_backlog``) within
    ``max_backlog_s`` of its rate, and the generator kept up."""
    reasons = []
    half = step.started + (step.ended - step.started) / 2
    late = [proposals.latency_ms(i, inf_if_missing=True) for i in range(step.first, step.last)
            if proposals.t_pub[i] >= half]
    p99 = quantile(sorted(late), 0.99) if late else math.nan
    if step.stop_reason:
        reasons.append(step.stop_reason)
    if not late or not p99 <= config.max_p99_ms:
        reasons.append(f"p99 of its second half {p99:.0f} ms > {config.max_p99_ms:.0f} ms")
    backlog = standing_backlog(timeline, step.ended)
    bound = max(200.0, step.rate * config.max_backlog_s)
    if backlog is None or backlog > bound:
        reasons.append(f"backlog at its end {backlog} > {bound:.0f}")
    offered = (step.last - step.first) / max(step.ended - step.started, 1e-9)
    if offered < 0.95 * step.rate:
        reasons.append(f"the generator offered only {offered:.0f}/s")
    return {"sustainable": not reasons, "reasons": reasons, "second_half_p99_ms": p99,
            "backlog_at_end": backlog, "backlog_bound": bound}


def standing_backlog(timeline: list[dict[str, Any]], ended: float) -> int | None:
    """The least backlog sampled in the ``STANDING_S`` before ``ended`` (the sample nearest it
    when none falls inside): what the pipeline did not once get below, not where one sample of
    a sawtooth fell. Consumers commit applied offsets every half second and the projection
    gathers its fetches, so at tens of proposals a second every group's lag swings by a few
    hundred records in a few seconds (bench/README.md, §End to end); a single sample at the end made
    the verdict on a step that kept up a toss of a coin. An alert that must hold ``for`` a
    while reads lag the same way."""
    window = [sample["backlog"] for sample in timeline
              if ended - STANDING_S <= sample["t"] <= ended and sample["backlog"] is not None]
    if window:
        return min(window)
    nearest = min(timeline, key=lambda s: abs(s["t"] - ended), default=None)
    return nearest["backlog"] if nearest else None
