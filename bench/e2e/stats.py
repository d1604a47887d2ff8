"""Quantiles and the summary (n, p50, p95, p99, max, mean) every latency figure is given as."""

from __future__ import annotations

import math

import numpy as np


def quantile(sorted_values: list[float], q: float) -> float:
    """Linear interpolation between the nearest ranks; an infinite neighbour (an unsettled
    proposal) makes the quantile infinite."""
    if not sorted_values:
        return math.nan
    position = q * (len(sorted_values) - 1)
    low = int(position)
    high = min(low + 1, len(sorted_values) - 1)
    if math.isinf(sorted_values[high]) or math.isinf(sorted_values[low]):
        return sorted_values[high]
    return sorted_values[low] + (sorted_values[high] - sorted_values[low]) * (position - low)


def summary(values: list[float]) -> dict[str, float | int | None]:
    ordered = sorted(values)
    if not ordered:
        return {"n": 0, "p50": None, "p95": None, "p99": None, "max": None, "mean": None}
    return {"n": len(ordered), "p50": _rounded(quantile(ordered, 0.50)),
            "p95": _rounded(quantile(ordered, 0.95)), "p99": _rounded(quantile(ordered, 0.99)),
            "max": _rounded(ordered[-1]), "mean": _rounded(float(np.mean(ordered)))}


def _rounded(value: float) -> float | None:
    return None if math.isnan(value) or math.isinf(value) else round(value, 2)
