"""Fleet-relative floors: each link judged against the links of its class in the same run(s), not a
hand-set share of a physical limit.

A class is what `rows.class_key` says (test, modes, size, link class, load, settings) and, for
links between nodes, whether both ends use the same rail (a cross-rail link crosses the spine). Each
link counts at its largest measured size (small messages never approach a link's limit). Within a
class, every figure becomes a log ratio to the class median, x = ln(figure / median) (inverted for
a latency, so below 0 is always worse), and the class's spread sigma is the root mean square of the
x within 3 MAD-sigmas of 0 (1.4826 x the median of |x|: the MAD scaled to a normal standard
deviation), corrected for that cut. Median and MAD are robust: one bad node, or a quarter of the
links, cannot move its own floor; the root mean square of the links the MAD keeps is steadier than
the MAD itself in a class of a few dozen links.

A link is **slow** when x < -k x sigma (k raised, for a large class, to the Student-t quantile of
alpha / links, so that noise alone flags about `alpha` of a link in it) AND its figure is at least `min_drop` below the median (so a
class of nearly equal figures does not flag differences nobody cares about): the floor is
median x min(exp(-k sigma), 1 - min_drop) (for a latency, median / that). A class of fewer than
`min_class_links` links is not judged (inconclusive). Where every link of a class has the same
physical limit (the entries' link_limit: PCIe generation x width, NVLink count, NIC rate, a measured
host copy), the class carries it and its median share of it, the ceiling no healthy link passes.

`LinkTable` holds all this column by column (numpy), a million links in a few hundred MB: the input
of the attribution (attribution.py).
"""

from __future__ import annotations

import functools
import math
import statistics
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from ..files.classes import class_fields, class_label
from ..files.rows import Row, class_key, load_of

# A column of the table: one value per link position, or per class.
Ints = npt.NDArray[np.int32]
Floats = npt.NDArray[np.float64]
Bools = npt.NDArray[np.bool_]

# The load of a link a screen measured again, alone (report.load_of of a re-measured entry).
REMEASURED = load_of({"remeasured_from": 0.0})
MAD_TO_SIGMA = 1.4826  # the MAD of a normal distribution times this is its standard deviation
ALIGNED, CROSS_RAIL = "rail-aligned", "cross-rail"


@dataclass(frozen=True)
class FloorParams:
    """What makes a link slow against its class (see the module's text)."""

    k: float = 3.0  # robust standard deviations below the class median
    min_drop: float = 0.05  # and at least this far below it (a share of the median)
    min_class_links: int = 6  # a class of fewer links is not judged: too few to know its median
    min_spread: float = 0.005  # sigma is at least this (identical figures make no difference significant)
    # Of a class of n healthy links, about `alpha` in all falls below the floor by chance: k grows to
    # the normal quantile 1 - alpha/n where that is more (3.9 for 112 links, 5.3 for 130,000). None: k alone.
    alpha: float | None = 0.01

    @property
    def most(self) -> float:
        """The highest log ratio a slow link can have whatever its class's spread: ln(1 - min_drop)."""
        return math.log1p(-self.min_drop)


@dataclass(frozen=True)
class ClassFloor:
    """One class of links: its median, spread and floor, and the physical limit its links share."""

    key: tuple[Any, ...]  # report.class_key + rail alignment
    label: str
    links: int
    unit: str
    higher_is_better: bool
    median: float  # of the links' figures (each link's median over runs)
    sigma: float  # of the log ratios (see the module's text), at least min_spread
    floor: float  # a link beyond it (below; for a latency, above) is slow
    judged: bool  # enough links to judge (min_class_links)
    slow: int  # links beyond the floor
    limit: str | None  # "NIC 50.0 GB/s": the physical limit every link of the class has, where known
    limit_gbps: float | None
    median_share: float | None  # the class median's share of that limit
    over_limit: int  # links whose figure is above their physical limit (a broken figure, or a wrong limit)

    def to_dict(self) -> dict[str, object]:
        return class_fields(self.key) | {
            "label": self.label,
            "links": self.links,
            "unit": self.unit,
            "median": self.median,
            "sigma": self.sigma,
            "floor": self.floor,
            "judged": self.judged,
            "slow": self.slow,
            "limit": self.limit,
            "limit_gbps": self.limit_gbps,
            "median_share": self.median_share,
            "over_limit": self.over_limit,
        }

    def describe(self) -> str:
        side = "below" if self.higher_is_better else "above"
        if not self.judged:
            return f"{self.label}: {self.links} link(s), too few to judge (inconclusive)"
        limit = f"; {self.median_share:.0%} of {self.limit}" if self.median_share is not None else ""
        return (
            f"{self.label}: {self.links} links, median {self.median:.4g} {self.unit}, spread {self.sigma:.1%}, "
            f"floor {self.floor:.4g} ({self.slow} {side}){limit}"
        )


def grouped_median(groups: Ints | npt.NDArray[np.intp], values: Floats, count: int) -> Floats:
    """The median of `values` in each of `count` groups (group ids 0..count-1); NaN for an empty group."""
    order = np.lexsort((values, groups))
    ordered = values[order]
    sizes = np.bincount(groups, minlength=count)
    starts = np.concatenate(([0], np.cumsum(sizes)[:-1]))
    found = np.full(count, np.nan)
    has = sizes > 0
    low = starts[has] + (sizes[has] - 1) // 2
    high = starts[has] + sizes[has] // 2
    found[has] = (ordered[low] + ordered[high]) / 2
    return found


def _k(params: FloorParams, sizes: npt.NDArray[np.intp], dof: Floats) -> Floats:
    """Per class of `sizes` links (its spread known to `dof` degrees of freedom): k, or more where
    the class is large (FloorParams.alpha)."""
    if params.alpha is None:
        return np.full(len(sizes), params.k)
    alpha = params.alpha
    return np.array(
        [
            max(params.k, student_quantile(alpha / n, d)) if n > 0 else params.k
            for n, d in zip(sizes.tolist(), dof.tolist(), strict=True)
        ]
    )


def _continued_fraction(a: float, b: float, x: float) -> float:
    """The continued fraction of the regularized incomplete beta function (Lentz's method)."""
    tiny, c, d = 1e-300, 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    found = d
    for m in range(1, 300):
        for numerator in (
            m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
            -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1)),
        ):
            d = 1.0 + numerator * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + numerator / c
            c = c if abs(c) > tiny else tiny
            found *= c * d
        if abs(c * d - 1.0) < 1e-15:
            break
    return found


def _incomplete_beta(a: float, b: float, x: float) -> float:
    """I_x(a, b), the regularized incomplete beta function."""
    if x <= 0.0 or x >= 1.0:
        return 0.0 if x <= 0.0 else 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _continued_fraction(a, b, x) / a
    return 1.0 - front * _continued_fraction(b, a, 1.0 - x) / b


def student_tail(t: float, dof: float) -> float:
    """P(T > t) for Student's t with `dof` degrees of freedom, t >= 0."""
    return 0.5 * _incomplete_beta(dof / 2.0, 0.5, dof / (dof + t * t))


@functools.cache
def student_quantile(tail: float, dof: float) -> float:
    """The t above which Student's t with `dof` degrees of freedom lies with probability `tail`
    (the normal quantile beyond 10,000 degrees of freedom): a spread estimated from few links is
    uncertain, so a link must stand further out."""
    normal = statistics.NormalDist().inv_cdf(1.0 - tail)
    if dof >= 10_000:
        return normal
    low, high = normal, normal
    while student_tail(high, max(dof, 1.0)) > tail:
        high *= 2.0
    for _ in range(100):  # bisection to the float's precision
        middle = (low + high) / 2.0
        low, high = (middle, high) if student_tail(middle, max(dof, 1.0)) > tail else (low, middle)
    return high


def _parse_end(text: str) -> tuple[str, str]:
    """(host, device) of a link end as report names it: `node017:gpu3`, `node017:rank12`."""
    host, _, device = text.rpartition(":")
    return host, device


def _nic_of(row: Row, host: str) -> str | None:
    """The NIC an end on `host` used ("host/mlx5_3:1"), from the row's NICs."""
    found = sorted(nic for nic in row.nics if nic.startswith(host + "/"))
    return "+".join(found) if found else None


def _rail(row: Row, src_end: str, dst_end: str, src_nic: str | None, dst_nic: str | None) -> str:
    """Whether an inter-node link joins ends of one rail: the same NIC name, or (no NIC known) the
    same GPU index; "" within a node or where neither is known."""
    if row.link_class != "inter-node":
        return ""
    if src_nic and dst_nic:
        return ALIGNED if src_nic.rpartition("/")[2] == dst_nic.rpartition("/")[2] else CROSS_RAIL
    src, dst = _parse_end(src_end)[1], _parse_end(dst_end)[1]
    if src.startswith("gpu") and dst.startswith("gpu"):
        return ALIGNED if src == dst else CROSS_RAIL
    return ""


def largest(rows: list[Row]) -> tuple[list[Row], dict[tuple[Any, ...], Row]]:
    """Each link at its largest measured size (per test, modes, load, settings), and the re-measured
    rows of a screen by the key of the screen row they re-measure (test, modes, size, link, settings)."""
    best: dict[tuple[Any, ...], Row] = {}
    again: dict[tuple[Any, ...], Row] = {}
    for row in rows:
        figure = _figure(row)
        if not (figure > 0 and math.isfinite(figure)):
            continue  # a hand-made row may hold anything; aggregate's figures are finite and above 0
        if row.remeasured:
            again[(row.test, row.src_mode, row.dst_mode, row.size_bytes, row.link, row.settings)] = row
            continue
        key = (row.test, row.src_mode, row.dst_mode, row.link, row.load, row.settings)
        found = best.get(key)
        if found is None or row.size_bytes > found.size_bytes:
            best[key] = row
    return list(best.values()), again


@dataclass
class LinkTable:
    """The links of a run (or runs), column by column: one position per link at its largest size in
    its class (a link measured under two loads is two positions, in two classes)."""

    rows: list[Row]
    params: FloorParams
    klass: Ints  # the position's class (index into `classes`)
    x: Floats  # log ratio to the class median, below 0 worse
    z: Floats  # x / the class's sigma
    slow: Bools  # beyond the class floor (and in a judged class)
    judged: Bools  # its class has enough links
    alone: Floats  # the log ratio of its re-measure alone after a screen (NaN: none)
    src_end: Ints  # the ends (`ends`: "node017:gpu3")
    dst_end: Ints
    src_host: Ints  # `hosts`
    dst_host: Ints
    src_nic: Ints  # `nics` ("node017/mlx5_3:1"), -1 where none is known
    dst_nic: Ints
    link: Ints  # the link (src end, dst end) whatever its class
    ends: list[str] = field(default_factory=list)
    hosts: list[str] = field(default_factory=list)
    nics: list[str] = field(default_factory=list)
    again: list[Row | None] = field(default_factory=list)  # the re-measured row, per position
    classes: list[ClassFloor] = field(default_factory=list)
    dof: Floats = field(default_factory=lambda: np.empty(0))  # per class: the degrees of freedom of its sigma

    def __len__(self) -> int:
        return len(self.rows)


def _nics(row: Row, owners: dict[str, str]) -> tuple[str | None, str | None]:
    """The NICs of a row's two ends ("host/mlx5_3:1", or None): each NIC's host read once, since
    a million rows hold a million distinct pairs of NICs but only a few thousand NICs."""
    if "/" in row.src_host or "/" in row.dst_host:  # a host name that a NIC's prefix cannot tell apart
        return _nic_of(row, row.src_host), _nic_of(row, row.dst_host)
    src: list[str] = []
    dst: list[str] = []
    for nic in row.nics:
        host = owners.get(nic)
        if host is None:
            host = owners[nic] = nic.partition("/")[0]
        if host == row.src_host:
            src.append(nic)
        if host == row.dst_host:
            dst.append(nic)
    return (
        (src[0] if len(src) == 1 else "+".join(sorted(src))) if src else None,
        (dst[0] if len(dst) == 1 else "+".join(sorted(dst))) if dst else None,
    )


@dataclass
class _Columns:
    """What `_columns` finds: a column per link position, and the names its numbers stand for."""

    src_end: Ints
    dst_end: Ints
    src_host: Ints
    dst_host: Ints
    src_nic: Ints
    dst_nic: Ints
    link: Ints
    klass: Ints
    figure: Floats
    remeasured: Floats
    share: Floats
    again: list[Row | None]
    limit: list[str | None]
    ends: list[str]
    hosts: list[str]
    nics: list[str]
    keys: list[tuple[Any, ...]]


def _columns(rows: list[Row], again: dict[tuple[Any, ...], Row]) -> _Columns:
    """The columns of `rows`: names numbered as they come (a dict's insertion order keeps them)."""
    ends: dict[str, int] = {}
    hosts: dict[str, int] = {}
    nics: dict[str | None, int] = {None: -1}
    links: dict[tuple[int, int], int] = {}
    keys: dict[tuple[Any, ...], int] = {}
    owners: dict[str, str] = {}
    names = ("src_end", "dst_end", "src_host", "dst_host", "src_nic", "dst_nic", "link", "klass")
    records: list[tuple[Any, ...]] = []
    add = records.append
    for row in rows:
        src_text, _, dst_text = row.link.partition(" -> ")
        src, dst = ends.setdefault(src_text, len(ends)), ends.setdefault(dst_text, len(ends))
        src_nic, dst_nic = _nics(row, owners) if row.nics else (None, None)
        rail = _rail(row, src_text, dst_text, src_nic, dst_nic)
        matched = (
            again.get((row.test, row.src_mode, row.dst_mode, row.size_bytes, row.link, row.settings)) if again else None
        )
        values = (  # a tuple a link, turned into columns at once at the end
            src, dst, hosts.setdefault(row.src_host, len(hosts)), hosts.setdefault(row.dst_host, len(hosts)),
            nics.setdefault(src_nic, len(nics) - 1), nics.setdefault(dst_nic, len(nics) - 1),
            links.setdefault((src, dst), len(links)), keys.setdefault((*class_key(row), rail), len(keys)),
            _figure(row), math.nan if matched is None else _figure(matched), matched,
            row.share if row.shares else math.nan, row.limit,
        )  # fmt: skip
        add(values)
    every = (*names, "figure", "remeasured", "again", "share", "limit")
    found = dict(zip(every, zip(*records, strict=True), strict=True)) if records else dict.fromkeys(every, ())
    ints = {name: np.array(found[name], np.int32) for name in names}
    floats = {name: np.array(found[name], np.float64) for name in ("figure", "remeasured", "share")}
    return _Columns(
        ints["src_end"], ints["dst_end"], ints["src_host"], ints["dst_host"], ints["src_nic"], ints["dst_nic"],
        ints["link"], ints["klass"], floats["figure"], floats["remeasured"], floats["share"],
        list(found["again"]), list(found["limit"]), list(ends), list(hosts), [n for n in nics if n is not None],
        list(keys),
    )  # fmt: skip


def _figure(row: Row) -> float:
    """A row's figure (its median over runs), without statistics.median for the one run most rows hold."""
    values = row.values
    return values[0] if len(values) == 1 else row.median


TRUNCATED_SD = 0.98658  # the standard deviation of a normal distribution cut at +-3 sigma, in sigmas


def _spread(klass: Ints, x: Floats, count: int, params: FloorParams) -> tuple[Floats, Floats]:
    """Per class: sigma and its degrees of freedom. The MAD finds the healthy links (within 3 of its
    sigmas); their root mean square, corrected for the cut, is the spread (the MAD alone, from a
    class of 16 links, is off by a third as often as not)."""
    rough = MAD_TO_SIGMA * grouped_median(klass, np.abs(x), count)
    kept = np.abs(x) <= 3.0 * rough[klass]
    held = np.bincount(klass, weights=kept, minlength=count)
    squares = np.bincount(klass, weights=np.where(kept, x * x, 0.0), minlength=count)
    with np.errstate(invalid="ignore", divide="ignore"):
        refined = np.sqrt(squares / held) / TRUNCATED_SD
    sigma = np.where((held >= 2) & np.isfinite(refined), refined, rough)
    return np.maximum(np.nan_to_num(sigma), params.min_spread), np.maximum(held - 1, 1)


def table(rows: list[Row], params: FloorParams | None = None) -> LinkTable:
    """The LinkTable of `rows` (report.aggregate's), each link at its largest size, re-measured rows
    of a screen joined to the screen's row of the same link."""
    params = params or FloorParams()
    chosen, again = largest(rows)
    columns = _columns(chosen, again)
    klass, figure = columns.klass, columns.figure
    keys = columns.keys
    count = len(keys)
    higher = np.ones(count, bool)
    first = dict(zip(klass.tolist()[::-1], chosen[::-1], strict=True))
    for index, row in first.items():
        higher[index] = row.higher_is_better
    sign = np.where(higher[klass], 1.0, -1.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        logs = np.log(figure)
        medians = grouped_median(klass, logs, count) if len(chosen) else np.empty(0)
        x = sign * (logs - medians[klass])
        sigma, dof = _spread(klass, x, count, params)
        sizes = np.bincount(klass, minlength=count)
        judged = (sizes >= params.min_class_links)[klass]
        z = x / sigma[klass]
        cut = np.minimum(-_k(params, sizes, dof) * sigma, params.most)  # the floor as a log ratio, per class
        slow = judged & (x < cut[klass])
        alone = sign * (np.log(columns.remeasured) - medians[klass])
    classes = _class_floors(chosen, columns, np.exp(medians), sigma, cut, higher, slow, params)
    return LinkTable(
        chosen, params, klass, x, z, slow, judged, alone,
        columns.src_end, columns.dst_end, columns.src_host, columns.dst_host,
        columns.src_nic, columns.dst_nic, columns.link,
        columns.ends, columns.hosts, columns.nics, columns.again, classes, dof,
    )  # fmt: skip


def _class_floors(
    rows: list[Row],
    columns: _Columns,
    medians: Floats,
    sigma: Floats,
    cut: Floats,
    higher: Bools,
    slow: Bools,
    params: FloorParams,
) -> list[ClassFloor]:
    """A ClassFloor per class: its figures' median, spread and floor, and its shared physical limit."""
    klass, keys, shares = columns.klass, columns.keys, columns.share
    count = len(keys)
    sizes = np.bincount(klass, minlength=count)
    limits: dict[int, set[str | None]] = {}
    for index, limit in set(zip(klass.tolist(), columns.limit, strict=True)):
        limits.setdefault(index, set()).add(limit)
    known = ~np.isnan(shares)
    shared = grouped_median(klass[known], shares[known], count)
    with_share = np.bincount(klass[known], minlength=count)
    over = np.bincount(klass[known & (shares > 1.0)], minlength=count)
    slow_counts = np.bincount(klass[slow], minlength=count)
    first = dict(zip(klass.tolist()[::-1], rows[::-1], strict=True))  # the first row of each class
    found = []
    for index, key in enumerate(keys):
        median, row = float(medians[index]), first[index]
        factor = math.exp(float(cut[index]))
        limit = next(iter(limits[index])) if len(limits[index]) == 1 else None
        found.append(
            ClassFloor(
                key=key,
                label=class_label(key),
                links=int(sizes[index]),
                unit=row.unit,
                higher_is_better=bool(higher[index]),
                median=median,
                sigma=float(sigma[index]),
                floor=median * factor if higher[index] else median / factor,
                judged=bool(sizes[index] >= params.min_class_links),
                slow=int(slow_counts[index]),
                limit=limit,
                limit_gbps=row.limit_gbps if limit else None,
                median_share=float(shared[index]) if limit and with_share[index] == sizes[index] else None,
                over_limit=int(over[index]),
            )
        )
    return found


def fleet_floors(rows: list[Row], params: FloorParams | None = None) -> list[ClassFloor]:
    """Per class of `rows`: its median, spread, floor and physical limit (see the module's text)."""
    return table(rows, params).classes


def below_floor(rows: list[Row], params: FloorParams | None = None) -> list[tuple[Row, ClassFloor, float]]:
    """The slow links of `rows`: each with its class and its figure's ratio to the class median
    (below 1 worse, for a latency too), worst first."""
    links = table(rows, params)
    indices = np.flatnonzero(links.slow)
    ratios = np.exp(links.x[indices])
    order = np.argsort(ratios, kind="stable")
    return [
        (links.rows[i], links.classes[links.klass[i]], float(r))
        for i, r in zip(indices[order].tolist(), ratios[order].tolist(), strict=True)
    ]
