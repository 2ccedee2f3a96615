"""Summaries of repeated samples (one median for the package), and the significance of a change
between two sets of runs (Mann-Whitney U, Benjamini-Hochberg)."""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Sequence
from itertools import chain
from typing import Any

import numpy as np


def median(values: Iterable[float]) -> float:
    """The median: the middle value, or the mean of the two middle ones (statistics.median's rule),
    the one median of the package. One value, the common case of a report's rows, costs no sort."""
    if isinstance(values, Sequence) and len(values) == 1:
        return float(values[0])
    return sorted_median(sorted(values))


def sorted_median(ordered: Any) -> float:
    """The median of values already sorted (a list or a numpy array)."""
    n = len(ordered)
    if not n:
        raise ValueError("no samples")
    half = n // 2
    return float(ordered[half]) if n % 2 else midpoint(float(ordered[half - 1]), float(ordered[half]))


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
    return {
        "median": sorted_median(ordered),
        "min": ordered[0],
        "max": ordered[-1],
        "mean": mean,
        "stdev": stdev,
        "p5": _interpolated(ordered, 5),
        "p25": _interpolated(ordered, 25),
        "p75": _interpolated(ordered, 75),
        "p95": _interpolated(ordered, 95),
    }


EXACT_UP_TO = 50  # runs a side up to which a p-value without ties is exact; beyond, the normal approximation


def mann_whitney_p(a: list[float], b: list[float]) -> float:
    """Two-sided p-value of the Mann-Whitney U test: how likely values this far apart are if both
    come from one distribution. Exact where no value is tied and each side has at most EXACT_UP_TO;
    else the normal approximation with tie and continuity corrections (scipy's `asymptotic`)."""
    n1, n2 = len(a), len(b)
    if n1 == 0 or n2 == 0:
        return 1.0
    combined = sorted([(v, 0) for v in a] + [(v, 1) for v in b])
    ranks = [0.0] * len(combined)
    ties = 0.0
    i = 0
    while i < len(combined):
        j = i
        while j + 1 < len(combined) and combined[j + 1][0] == combined[i][0]:
            j += 1
        for k in range(i, j + 1):
            ranks[k] = (i + j) / 2 + 1
        count = j - i + 1
        ties += count**3 - count
        i = j + 1
    rank_a = sum(r for r, (_, group) in zip(ranks, combined, strict=True) if group == 0)
    u = rank_a - n1 * (n1 + 1) / 2
    if ties == 0 and n1 <= EXACT_UP_TO and n2 <= EXACT_UP_TO:
        return _exact_p(_exact_tail(n1, n2), u)
    n = n1 + n2
    variance = n1 * n2 / 12 * ((n + 1) - ties / (n * (n - 1))) if n > 1 else 0.0
    if variance <= 0:
        return 1.0
    z = (abs(u - n1 * n2 / 2) - 0.5) / math.sqrt(variance)
    return max(0.0, min(1.0, math.erfc(max(z, 0.0) / math.sqrt(2))))


@functools.cache
def _exact_tail(n1: int, n2: int) -> tuple[float, ...]:
    """P(U >= k), k = 0 .. n1*n2, for samples of n1 and n2 untied values from one distribution. The
    counts of U are the coefficients of the Gaussian binomial [n1+n2 choose n1], the product over i
    of (1 - q^(n2+i)) / (1 - q^i): multiplied and divided out term by term, in exact integers."""
    top, small, large = n1 * n2, min(n1, n2), max(n1, n2)
    counts = [1] + [0] * top
    for i in range(1, small + 1):
        for k in range(top, large + i - 1, -1):  # times (1 - q^(large+i)); beyond `top` nothing is kept
            counts[k] -= counts[k - large - i]
        for k in range(i, top + 1):  # divided by (1 - q^i): a power series, exact up to `top`
            counts[k] += counts[k - i]
    total, running, tail = math.comb(n1 + n2, n1), 0, [0.0] * (top + 1)
    for k in range(top, -1, -1):
        running += counts[k]
        tail[k] = running / total  # integers divided: the float nearest the exact fraction
    return tuple(tail)


def _exact_p(tail: tuple[float, ...], u: float) -> float:
    """The exact two-sided p-value of U = `u` (an integer: no ties) from its shape's `_exact_tail`."""
    top = len(tail) - 1
    return min(1.0, 2.0 * tail[int(max(u, top - u))])


def benjamini_hochberg(p_values: list[float]) -> list[float]:
    """Benjamini-Hochberg q-values: per test, the smallest false discovery rate at which it counts
    as a discovery among all of them (a NaN p-value counts as 1)."""
    if not p_values:
        return []
    values = np.nan_to_num(np.asarray(p_values, dtype=float), nan=1.0)
    order = np.argsort(values, kind="stable")
    count = len(values)
    scaled = values[order] * count / np.arange(1, count + 1)
    found = np.empty(count)
    found[order] = np.minimum(np.minimum.accumulate(scaled[::-1])[::-1], 1.0)
    return found.tolist()  # type: ignore[no-any-return]


def mann_whitney_many(pairs: list[tuple[list[float], list[float]]]) -> list[float]:
    """`mann_whitney_p` of each pair (the same floats), pairs of equal sample counts at once with
    numpy: a million links compare in seconds."""
    found: list[float | None] = [None] * len(pairs)
    shapes: dict[tuple[int, int], list[int]] = {}
    for index, (a, b) in enumerate(pairs):
        shapes.setdefault((len(a), len(b)), []).append(index)
    for (n1, n2), indices in shapes.items():
        if n1 == 0 or n2 == 0 or len(indices) < _VECTOR_FROM:
            for index in indices:
                found[index] = mann_whitney_p(*pairs[index])
            continue
        for start in range(0, len(indices), _CHUNK):
            chunk = indices[start : start + _CHUNK]
            flat = chain.from_iterable(chain(*pairs[i]) for i in chunk)
            values = np.fromiter(flat, float, len(chunk) * (n1 + n2)).reshape(len(chunk), n1 + n2)
            for index, p_value in zip(chunk, _mann_whitney_rows(values, n1), strict=True):
                found[index] = p_value if p_value is not None else mann_whitney_p(*pairs[index])
    return found  # type: ignore[return-value]


_VECTOR_FROM = 32  # pairs of one shape: fewer go one by one
_CHUNK = 20_000


def _mann_whitney_rows(values: Any, n1: int) -> list[float | None]:
    """Per row of `values` (its first n1 samples one side's, the rest the other's): the p-value,
    computed as mann_whitney_p does, operation for operation; None for a row with a NaN."""
    n = values.shape[1]
    n2 = n - n1
    less = (values[:, None, :] < values[:, :, None]).sum(axis=2)
    equal = (values[:, None, :] == values[:, :, None]).sum(axis=2)
    rank_a = (less[:, :n1] + (equal[:, :n1] + 1) / 2).sum(axis=1)  # half-integers: exact in any order
    ties = (equal * equal - 1).sum(axis=1)  # each value of a tie of c contributes c*c - 1: c**3 - c a tie
    u = rank_a - n1 * (n1 + 1) / 2
    variance = n1 * n2 / 12 * ((n + 1) - ties / (n * (n - 1)))  # n1, n2 >= 1: n > 1
    with np.errstate(invalid="ignore", divide="ignore"):
        z = (np.abs(u - n1 * n2 / 2) - 0.5) / np.sqrt(variance)
    broken = np.isnan(values).any(axis=1)
    root2 = math.sqrt(2)
    found: list[float | None] = [
        None if bad else (1.0 if var <= 0 else max(0.0, min(1.0, math.erfc(max(zed, 0.0) / root2))))
        for bad, var, zed in zip(broken.tolist(), variance.tolist(), z.tolist(), strict=True)
    ]
    if n1 <= EXACT_UP_TO and n2 <= EXACT_UP_TO:  # rows without ties: exact, as mann_whitney_p
        tail = _exact_tail(n1, n2)
        for index in np.flatnonzero((ties == 0) & ~broken).tolist():
            found[index] = _exact_p(tail, float(u[index]))
    return found


def _scaled_moments(ordered: list[float]) -> tuple[float, float]:
    """Mean and sample standard deviation of finite values whose sums overflow a float."""
    scale = max(abs(ordered[0]), abs(ordered[-1]))
    scaled = [v / scale for v in ordered]
    n = len(scaled)
    mean = math.fsum(scaled) / n
    spread = math.sqrt(math.fsum((v - mean) ** 2 for v in scaled) / (n - 1)) if n > 1 else 0.0
    return mean * scale, spread * scale
