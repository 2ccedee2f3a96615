"""Per-link-class distributions: how the links of one class (test, modes, size, link class, load,
settings: the class a link's outlier standing is judged in) spread, as the share of the class's
physical limit where every link of the class has the same known limit, else in the test's unit.
Percentiles (min, p1, p5, p50, p95, max), a histogram of fixed bins, the median and the outlier
threshold; for the report in every format, the HTML page drawing one CDF per class."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypedDict

import numpy as np

from ... import escape, stats
from ...stats import sorted_median
from ..files.classes import ClassFields, class_fields, class_label

if TYPE_CHECKING:
    from ..files.rows import Row

SHARE = "share of limit"  # the unit of a class measured against its physical limit
BINS = 50  # a histogram's bins, between the class's min and max
PERCENTILES = (1, 5, 95)  # beside min, the median (p50) and max
OUTLIERS_FROM = 3  # links in a class: two have no majority to stand out from (report.outliers)


class Histogram(TypedDict):
    bins: int
    edges: list[float]
    counts: list[int]


class DistributionRecord(ClassFields, total=False):
    """A class's distribution as the report's JSON writes it: its class, then its figures."""

    links: int
    not_finite: int
    unit: str
    limit: str | None
    min: float
    p1: float
    p5: float
    p50: float
    p95: float
    max: float
    outlier_threshold: float | None
    outliers: int
    histogram: Histogram


@dataclass(frozen=True)
class Distribution:
    """The links of one class: their figures (each link's median over runs) or shares of the limit."""

    key: tuple[Any, ...]  # report.class_key
    label: str
    unit: str  # SHARE, or the figure's unit
    limit: str | None  # the class's physical limit, where its shares are used
    higher_is_better: bool
    values: Any  # numpy array, sorted, in `unit`: the finite ones
    left_out: int  # links whose value is not finite
    median: float  # statistics.median of the values
    threshold: float | None  # a link beyond it is an outlier (classes of OUTLIERS_FROM links or more)
    outliers: int  # links beyond the threshold, as report.outliers counts them

    @property
    def links(self) -> int:
        return len(self.values)

    def percentiles(self) -> dict[str, float]:
        """min, p1, p5, p50, p95, max (linear interpolation, as numpy's and stats.percentile's default)."""
        if not self.links:
            return dict.fromkeys(("min", "p1", "p5", "p50", "p95", "max"), math.nan)
        inner = np.percentile(self.values, PERCENTILES).tolist()
        low, high = float(self.values[0]), float(self.values[-1])
        return {"min": low, "p1": inner[0], "p5": inner[1], "p50": self.median, "p95": inner[2], "max": high}

    def histogram(self, bins: int = BINS) -> tuple[list[int], list[float]]:
        """Links per bin, and the bins' edges: `bins` equal bins from the min to the max."""
        counts, edges = np.histogram(self.values, bins=bins)  # no values: bins from 0 to 1, empty
        return counts.tolist(), edges.tolist()

    def to_dict(self) -> DistributionRecord:
        counts, edges = self.histogram()
        found: DistributionRecord = {**class_fields(self.key)}
        found |= {"links": self.links, "not_finite": self.left_out, "unit": self.unit, "limit": self.limit}
        at = self.percentiles()
        found |= {
            "min": at["min"],
            "p1": at["p1"],
            "p5": at["p5"],
            "p50": at["p50"],
            "p95": at["p95"],
            "max": at["max"],
        }
        found |= {"outlier_threshold": self.threshold, "outliers": self.outliers}
        found["histogram"] = {"bins": len(counts), "edges": edges, "counts": counts}
        return found


def distributions(groups: Iterable[tuple[tuple[Any, ...], list[Row]]], fraction: float) -> list[Distribution]:
    """One Distribution per class, from report.classes(rows).items(); by class key."""
    return [_distribution(key, members, fraction) for key, members in sorted(groups, key=lambda item: item[0])]


def _distribution(key: tuple[Any, ...], members: list[Row], fraction: float) -> Distribution:
    first, count = members[0], len(members)
    figures = np.fromiter((row.median for row in members), float, count)
    finite = np.isfinite(figures).all()  # as aggregate makes them; a hand-made row may hold anything
    typical = sorted_median(np.sort(figures)) if finite else stats.median(figures.tolist())  # standings'
    if first.limit is not None and all(row.shares and row.limit == first.limit for row in members):
        values = np.fromiter((row.share for row in members), float, count)
        unit, limit = SHARE, first.limit
    else:
        values, unit, limit = figures, first.unit, None
    values = np.sort(values[np.isfinite(values)])
    median = sorted_median(values) if len(values) else math.nan
    threshold, outliers = None, 0
    if count >= OUTLIERS_FROM:
        sign = -1 if first.higher_is_better else 1
        threshold = median * (1 + sign * fraction)
        with np.errstate(invalid="ignore"):
            off = figures / typical - 1 if typical else np.zeros(count)
        outliers = int(np.count_nonzero(off < -fraction if first.higher_is_better else off > fraction))
    label = _label(key, next((row.differs for row in members if row.differs), ""))
    return Distribution(
        key, label, unit, limit, first.higher_is_better, values, count - len(values), median, threshold, outliers
    )


def _label(key: tuple[Any, ...], differs: str) -> str:
    return class_label(key) + (f", {differs}" if differs else "")


def shown(value: float, unit: str) -> str:
    """A value of a distribution as the report writes it: shares in %, figures to 4 digits."""
    return f"{value * 100:.1f}" if unit == SHARE else f"{value:.4g}"


def unit_text(found: Distribution) -> str:
    return f"% of {found.limit}" if found.unit == SHARE else found.unit


def summary(found: Distribution) -> str:
    """One line: the class, its links, its percentiles and its outlier threshold."""
    cells = ", ".join(f"{name} {shown(value, found.unit)}" for name, value in found.percentiles().items())
    line = f"{found.label}: {found.links} links; {cells} ({unit_text(found)})"
    if found.threshold is not None:
        side = "below" if found.higher_is_better else "above"
        line += f"; outlier threshold {shown(found.threshold, found.unit)}, {found.outliers} {side}"
    return line


def text_lines(found: list[Distribution]) -> list[str]:
    """The table report's section: a line per class."""
    head = "distribution per link class (each link's median over runs; % = of the class's physical limit):"
    return [head] + [f"  {escape.visible(summary(one))}" for one in found]


def markdown_lines(found: list[Distribution]) -> list[str]:
    """The Markdown report's section: a table, a row per class."""
    lines = [
        "## Distribution per link class",
        "",
        "Each link's median over runs; % = of the class's physical limit.",
        "",
        "| class | links | unit | min | p1 | p5 | p50 | p95 | max | outlier threshold | outliers |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for one in found:
        cells = [shown(value, one.unit) for value in one.percentiles().values()]
        threshold = shown(one.threshold, one.unit) if one.threshold is not None else "-"
        row = [one.label, str(one.links), unit_text(one), *cells, threshold, str(one.outliers)]
        lines.append("| " + " | ".join(map(escape.markdown, row)) + " |")
    return lines


# --- one CDF per class, as inline SVG ---------------------------------------------------------

DRAWN_UP_TO = 120  # classes drawn; beyond, the largest (every class keeps its line in the table)
_STEPS_UP_TO = 400  # links drawn step by step; beyond, 201 quantiles
_W, _H, _LEFT, _RIGHT, _TOP, _BOTTOM = 360, 180, 34, 10, 34, 30


def cdf_svg(found: Distribution) -> str:
    """The class's CDF (share of links at or below each value), its median and outlier threshold
    marked, as an inline SVG of a few kilobytes."""
    values = found.values
    marks = [found.median] + ([found.threshold] if found.threshold is not None else [])
    low, high = min(float(values[0]), *marks), max(float(values[-1]), *marks)
    pad = (high - low) * 0.03 or abs(high) * 0.05 or 1.0
    low, high = low - pad, high + pad

    def x(value: float) -> float:
        return _LEFT + (value - low) / (high - low) * (_W - _LEFT - _RIGHT)

    def y(share: float) -> float:
        return _H - _BOTTOM - share * (_H - _TOP - _BOTTOM)

    points = " ".join(f"{x(v):.1f},{y(q):.1f}" for v, q in _cdf_points(values))
    parts = [
        f'<svg class="cdf" xmlns="http://www.w3.org/2000/svg" width="{_W}" height="{_H}" '
        f'viewBox="0 0 {_W} {_H}" data-class="{escape.html(found.label)}" data-links="{found.links}">',
        f'<text x="4" y="12" font-size="10">{escape.html(found.label)}</text>',
        f'<text x="4" y="25" font-size="9">{found.links} link{"s" if found.links != 1 else ""}</text>',
        f'<rect x="{_LEFT}" y="{_TOP}" width="{_W - _LEFT - _RIGHT}" height="{_H - _TOP - _BOTTOM}" '
        'fill="none" stroke="#999"/>',
        f'<polyline fill="none" stroke="#226" stroke-width="1.5" points="{points}"/>',
    ]
    parts += _mark(x(found.median), "#080", f"median {shown(found.median, found.unit)}", 0)
    if found.threshold is not None:
        parts += _mark(x(found.threshold), "#c00", f"outliers beyond {shown(found.threshold, found.unit)}", 1)
    parts += _axes(found, low, high)
    return "".join(parts) + "</svg>"


def _cdf_points(values: Any) -> list[tuple[float, float]]:
    """(value, share of links at or below it): every step for a small class, quantiles for a large one."""
    count = len(values)
    if count <= _STEPS_UP_TO:
        points = [(float(values[0]), 0.0)]
        for index, value in enumerate(values.tolist()):
            points += [(value, index / count), (value, (index + 1) / count)]
        return points
    levels = np.linspace(0.0, 1.0, 201)
    return list(zip(np.quantile(values, levels).tolist(), levels.tolist(), strict=True))


def _mark(at: float, colour: str, text: str, line: int) -> list[str]:
    return [
        f'<line x1="{at:.1f}" y1="{_TOP}" x2="{at:.1f}" y2="{_H - _BOTTOM}" stroke="{colour}" stroke-dasharray="4 2"/>',
        f'<text x="{_LEFT + 4}" y="{_TOP + 11 + 11 * line}" font-size="9" fill="{colour}">{escape.html(text)}</text>',
    ]


def _axes(found: Distribution, low: float, high: float) -> list[str]:
    bottom = _H - _BOTTOM
    return [
        f'<text x="{_LEFT}" y="{bottom + 11}" font-size="9">{shown(low, found.unit)}</text>',
        f'<text x="{_W - _RIGHT}" y="{bottom + 11}" font-size="9" text-anchor="end">{shown(high, found.unit)}</text>',
        f'<text x="{(_LEFT + _W - _RIGHT) / 2}" y="{bottom + 24}" font-size="9" text-anchor="middle">'
        f"{escape.html(unit_text(found))}</text>",
        f'<text x="{_LEFT - 3}" y="{bottom + 3}" font-size="9" text-anchor="end">0</text>',
        f'<text x="{_LEFT - 3}" y="{_TOP + 3}" font-size="9" text-anchor="end">1</text>',
    ]


DRAWN_FROM = 6  # links a class needs to have a distribution (as it needs them to be judged: fleet.py)


def drawn(found: list[Distribution]) -> list[Distribution]:
    """The classes the page draws (those of DRAWN_FROM finite values or more: a class of one link
    has no distribution): all up to DRAWN_UP_TO, else the largest, in class order."""
    found = [one for one in found if one.links >= DRAWN_FROM]
    if len(found) <= DRAWN_UP_TO:
        return found
    largest = {id(one) for one in sorted(found, key=lambda one: -one.links)[:DRAWN_UP_TO]}
    return [one for one in found if id(one) in largest]
