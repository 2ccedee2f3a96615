"""Summaries of repeated samples."""

from __future__ import annotations

import math


def percentile(values: list[float], q: float) -> float:
    """Linear-interpolation percentile (q in 0..100), the same rule as numpy's default."""
    ordered = sorted(values)
    if not ordered:
        raise ValueError("no samples")
    return _interpolated(ordered, q)


def _interpolated(ordered: list[float], q: float) -> float:
    position = (len(ordered) - 1) * q / 100.0
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def summarize(values: list[float]) -> dict[str, float]:
    """Median, extremes, mean, sample standard deviation and percentiles, from one sort (a report
    on a million links summarizes a million sample lists)."""
    ordered = sorted(values)
    n = len(ordered)
    if not n:
        raise ValueError("no samples")
    mean = math.fsum(ordered) / n
    half = n // 2

    return {
        "median": ordered[half] if n % 2 else (ordered[half - 1] + ordered[half]) / 2,
        "min": ordered[0],
        "max": ordered[-1],
        "mean": mean,
        "stdev": math.sqrt(math.fsum((v - mean) ** 2 for v in ordered) / (n - 1)) if n > 1 else 0.0,
        "p5": _interpolated(ordered, 5),
        "p25": _interpolated(ordered, 25),
        "p75": _interpolated(ordered, 75),
        "p95": _interpolated(ordered, 95),
    }
