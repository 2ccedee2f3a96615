"""A row's slowdown beside compute from all its pairs: the estimate, its 95% interval and the noise floor.

Pure functions over the figures a round's GPUs record (besiderecord.GpuRecord): each pair's slowdown
(`slowdown_pairs`: the shared window's mean operation time over the mean of the alone windows before and
after it) and its alone windows (`alone_s_pairs`: mean seconds an operation, before and after).

Why not accept or reject each pair. On an H200 at its 700 W limit the GEMM alone swings a few percent
about once a second, and an 80 ms window samples the swing: a 3% test of the windows around a pair left
49-58 of 105 pairs unjudged and answered rows from 0-2 pairs, at the cost of 124-144 retakes a run. A
swing is noise in both halves of a pair, not a fault of the pair: rejecting on it throws data away and
keeps no promise about what is left. So every pair whose transfer was in flight for at least the duty
floor counts, and the load's swing widens the interval instead.

The model, on one GPU (all figures relative to the load alone, x = 1 + e):
- an alone window reads the load's level times (1 + e), e of standard deviation s (the swing as an 80 ms
  window samples it); the shared window likewise, plus the transfer's own effect, which may vary from pair
  to pair by t;
- a pair's ratio r_i = W_i / ((B_i + A_i) / 2) then varies by t^2 + s^2 + s^2 / 2, and a clock drifting
  steadily through the pair cancels in the mean of its two windows;
- pairs in a row share a window (one pair's after is the next one's before, when both are the same record
  value): two such ratios covary by s^2 / 4, so the mean of n ratios with c shared windows varies by
  (t^2 + 1.5 s^2) / n + c s^2 / (2 n^2), and the sample variance S^2 of the ratios reads low by
  c s^2 / (2 n (n - 1)).

The estimate is the mean of the used pairs' ratios (a mean, as the window's is: a median never sees the
pairs a few transfers stalled). Its variance is the larger of two readings: the pairs' own spread,
S^2 / n + c s^2 / (2 n (n - 1)) (t^2 read from the pairs, corrected for the shared windows), and the load's
swing alone, 1.5 s^2 / n + c s^2 / (2 n^2), s read from the row's alone windows (`swing`: the mean square
of the differences between each pair's windows before and after, over two; slow trends hardly move it).
The larger one is the method of moments' estimate with t^2 held at zero or more: a row whose few pairs
happen to agree is never read as more precise than its load allows. The interval is the estimate
+- t(0.975, n - 1) x its standard error: Student's quantile on the pairs' degrees of freedom, also where
the swing decides (its own estimate rests on as few windows), so never narrower than a t-interval of the
pairs. The noise floor is the same half-width from the swing alone: the smallest slowdown the row can
tell from none.

The row's slowdown is the worse GPU's: the estimate of the GPU reading the higher, with the interval
[the higher of the GPUs' lows, the higher of their highs], which holds max(mu_0, mu_1) whenever both GPUs'
intervals hold their own: 95% where one GPU is clearly the worse (the usual case: the initiator's GPU runs
the posting), at least 92.5% where both read alike. (Taking the worse GPU pair by pair first, as the
records' `slowdown_pairs` do, reads high by about half a pair's spread where the GPUs are alike.)

`precise` says when a row has pairs enough: every GPU's interval within +-`target` (the row's is then too:
its width is at most the widest GPU's), after at least the planned pairs; `wants_more` its converse over the
GPUs with a pair used, so that a row no pair of which can be used asks for none. Stopping on a narrow interval
reads a little optimistic where the spread happens to be low; the swing's floor bounds that
(tests/test_slowdown.py measures the coverage of the whole rule on generated rows).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

TARGET = 0.02  # a row's interval within +-2 points of slowdown is precise enough (issue 54)
# Student's t at 0.975 for 1 to 30 degrees of freedom; past 30 the Cornish-Fisher expansion (t975).
_T975 = (
    12.7062, 4.3027, 3.1824, 2.7764, 2.5706, 2.4469, 2.3646, 2.3060, 2.2622, 2.2281,
    2.2010, 2.1788, 2.1604, 2.1448, 2.1314, 2.1199, 2.1098, 2.1009, 2.0930, 2.0860,
    2.0796, 2.0739, 2.0687, 2.0639, 2.0595, 2.0555, 2.0518, 2.0484, 2.0452, 2.0423,
)  # fmt: skip
_Z975 = 1.959964
# The records keep a pair's ratio to 4 decimals (pairs.py): ratios that agree there may differ by up to
# 1e-4, so no ratio is read as more exact than a uniform error over that step, variance RESOLUTION^2 / 12.
# Zero spread and no swing then still give an interval of honest, nonzero width (review9).
RESOLUTION = 1e-4


def t975(df: int) -> float:
    """Student's t quantile at 0.975 with `df` degrees of freedom (df >= 1)."""
    if df < 1:
        raise ValueError(f"no t quantile for {df} degrees of freedom")
    if df <= len(_T975):
        return _T975[df - 1]
    z, v = _Z975, float(df)  # Abramowitz and Stegun 26.7.5: within 1e-4 from 30 on
    return (
        z
        + (z**3 + z) / (4 * v)
        + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * v**2)
        + (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / (384 * v**3)
    )


@dataclass(frozen=True)
class Estimate:
    """A slowdown from pairs: the mean of the used pairs' ratios, its 95% interval (None under two
    pairs), the noise floor (the interval's half-width from the load's swing alone; None where the row
    has no alone windows to read it from) and the pairs used."""

    slowdown: float | None
    interval: tuple[float, float] | None
    noise_floor: float | None
    pairs_used: int

    @property
    def half_width(self) -> float | None:
        """Half the interval's width (None without one)."""
        return None if self.interval is None else (self.interval[1] - self.interval[0]) / 2


NONE = Estimate(None, None, None, 0)

Window = tuple[float | None, float | None]  # a pair's alone windows, before and after (mean seconds)


def swing(alone: Sequence[Window]) -> float | None:
    """The load's own swing in an alone window, relative (0.012: 1.2%): the root mean square of each
    pair's after over before less one, over root two (two windows' difference varies twice as one).
    Every pair's windows count, used or not: the swing is the load's. None without a pair of two."""
    steps = [after / before - 1 for before, after in alone if before and after and before > 0 and after > 0]
    steps = [step for step in steps if math.isfinite(step)]
    if not steps:
        return None
    return math.sqrt(sum(step * step for step in steps) / (2 * len(steps)))


def shared_windows(alone: Sequence[Window], used: Sequence[int]) -> int:
    """How many neighbouring used pairs share a window: a pair's after is the next pair's before."""
    kept = set(used)
    return sum(
        1
        for index in range(len(alone) - 1)
        if index in kept
        and index + 1 in kept
        and alone[index][1] is not None
        and alone[index][1] == alone[index + 1][0]
    )


def estimate(ratios: Sequence[float], noise: float | None, shared: int = 0) -> Estimate:
    """One GPU's estimate from its used pairs' `ratios` (a non-finite one is no figure), the load's swing
    `noise` (swing(); None: unknown, the pairs' spread alone) and the number of `shared` windows between
    them (shared_windows()). The pairs' spread is never read below the records' RESOLUTION."""
    ratios = [r for r in ratios if math.isfinite(r)]
    n = len(ratios)
    if not n:
        return NONE
    mean = sum(ratios) / n
    if n < 2:
        return Estimate(mean, None, None, n)
    spread = max(sum((r - mean) ** 2 for r in ratios) / (n - 1), RESOLUTION * RESOLUTION / 12)
    swing2 = noise * noise if noise is not None else 0.0
    own = spread / n + shared * swing2 / (2 * n * (n - 1))  # the pairs' spread, corrected for shared windows
    load = (1.5 * swing2) / n + shared * swing2 / (2 * n * n)  # the load's swing alone
    t = t975(n - 1)
    half = t * math.sqrt(max(own, load))
    floor = t * math.sqrt(load) if noise is not None else None
    return Estimate(mean, (mean - half, mean + half), floor, n)


def worse(estimates: Sequence[Estimate]) -> Estimate:
    """The row's estimate from its GPUs': the higher slowdown, with the interval [the higher low, the
    higher high] (where every GPU has one) and the noise floor of the GPU it came from. A non-finite
    estimate is no estimate (else the GPUs' order would decide). The pairs used are the fewest of any
    GPU's: the row's interval rests on every GPU's, so a GPU of one pair leaves the row one, and none."""
    found = [e for e in estimates if e.slowdown is not None and math.isfinite(e.slowdown)]
    if not found:
        return NONE
    top = max(found, key=lambda e: float(e.slowdown or 0.0))
    pairs = min(e.pairs_used for e in found)
    intervals = [e.interval for e in found]
    if any(interval is None for interval in intervals):
        return Estimate(top.slowdown, None, top.noise_floor, pairs)
    low = max(interval[0] for interval in intervals if interval is not None)
    high = max(interval[1] for interval in intervals if interval is not None)
    return Estimate(top.slowdown, (low, high), top.noise_floor, pairs)


class PairFigures(Protocol):
    """One GPU's pairs as its record holds them (besiderecord.GpuFigure, types checked on reading)."""

    @property
    def slowdown_pairs(self) -> list[float | None]: ...
    @property
    def alone_s_pairs(self) -> list[list[float | None]]: ...


def gpu_estimate(gpu: PairFigures, used: Sequence[int]) -> Estimate:
    """One GPU's estimate over the pairs `used` (those it has a figure of)."""
    slowdowns, alone = gpu.slowdown_pairs, [_window(pair) for pair in gpu.alone_s_pairs]
    mine = [index for index in used if 0 <= index < len(slowdowns) and slowdowns[index] is not None]
    ratios = [float(slowdowns[index] or 0.0) for index in mine]
    return estimate(ratios, swing(alone), shared_windows(alone, mine))


def row_estimate(gpus: Sequence[PairFigures], used: Sequence[int]) -> Estimate:
    """A row's estimate from its GPUs' records over the pairs `used` (the duty floor's: judging.judge_pairs)."""
    return worse([gpu_estimate(gpu, used) for gpu in gpus])


def precise(estimates: Sequence[Estimate], target: float = TARGET) -> bool:
    """Whether every GPU's interval is within +-`target` (then the row's is: it is no wider than the
    widest GPU's). A GPU with no used pair says nothing; one with a pair and no interval is not precise."""
    found = [e for e in estimates if e.pairs_used]
    return bool(found) and all(e.half_width is not None and e.half_width <= target for e in found)


def wants_more(estimates: Sequence[Estimate], target: float = TARGET) -> bool:
    """Whether another pair would narrow a row toward +-`target`: some GPU has used pairs and its
    interval is missing or wider. A row none of whose pairs is used (every duty under the floor: a
    path whose posting thread cannot keep its transfers in flight) asks for none: more would read alike."""
    return any(e.pairs_used and (e.half_width is None or e.half_width > target) for e in estimates)


def _window(pair: Sequence[float | None]) -> Window:
    """A pair's (before, after) as a record holds them: None where either is missing."""
    return (pair[0], pair[1]) if len(pair) == 2 else (None, None)
