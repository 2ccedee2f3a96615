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


def midpoint(low: float, high: float) -> float:
    """Halfway between two finite floats: (low + high) / 2, unless that sum overflows."""
    middle = (low + high) / 2
    return middle if not math.isinf(middle) else low / 2 + high / 2


def summarize(values: list[float]) -> dict[str, float]:
    """Median, extremes, mean, sample standard deviation and percentiles, from one sort (a report
    on a million links summarizes a million sample lists)."""
    ordered = sorted(values)
    n = len(ordered)
    if not n:
        raise ValueError("no samples")
    try:
        mean = math.fsum(ordered) / n
        stdev = math.sqrt(math.fsum((v - mean) ** 2 for v in ordered) / (n - 1)) if n > 1 else 0.0
    except OverflowError:  # values near the largest float (a corrupt file's): the same sums, scaled down
        mean, stdev = _scaled_moments(ordered)
    half = n // 2

    return {
        "median": ordered[half] if n % 2 else midpoint(ordered[half - 1], ordered[half]),
        "min": ordered[0],
        "max": ordered[-1],
        "mean": mean,
        "stdev": stdev,
        "p5": _interpolated(ordered, 5),
        "p25": _interpolated(ordered, 25),
        "p75": _interpolated(ordered, 75),
        "p95": _interpolated(ordered, 95),
    }


def _scaled_moments(ordered: list[float]) -> tuple[float, float]:
    """Mean and sample standard deviation of finite values whose sums overflow a float."""
    scale = max(abs(ordered[0]), abs(ordered[-1]))
    scaled = [v / scale for v in ordered]
    n = len(scaled)
    mean = math.fsum(scaled) / n
    spread = math.sqrt(math.fsum((v - mean) ** 2 for v in scaled) / (n - 1)) if n > 1 else 0.0
    return mean * scale, spread * scale
