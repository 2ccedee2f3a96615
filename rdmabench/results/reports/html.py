"""One self-contained HTML page: a block-list run's answer first (which posting path for each block
size, idle and within the model's budget, with its costs, and a plot of GB/s against the model's
slowdown per block size), then the suspect parts (where any link could be judged), per-link heatmaps (ends ordered by host,
then the NIC each sends through, then device: a bad GPU or NIC is a line), bandwidth-vs-size curves
per memory mode, shares of the physical limit, and the aggregate table. Plots are PNG images
embedded in the page."""

from __future__ import annotations

import base64
import heapq
import io
from typing import Any

from ... import escape, stats
from ...stats import median
from ...units import format_size
from ..files.rows import Row, bulk, outliers, standings
from ..verdicts.attribution import Attribution, attribute
from ..verdicts.suspects import end_order
from . import distribution
from .answer import BUDGET, TABLE_COLUMNS, Answer, Point, answers, budget_words, notes, short_label, table
from .cells import COLUMNS, cells, class_distributions, outlier_lines


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    matplotlib.rcParams["text.usetex"] = False  # labels are names from files: never LaTeX (nor math: _label)
    import matplotlib.pyplot as plt

    return plt


_label = escape.matplotlib_label  # every text a plot draws holds names from files


def _png(fig: Any) -> str:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110, bbox_inches="tight")
    _pyplot().close(fig)
    return base64.b64encode(buffer.getvalue()).decode()


def _image(title: str, data: str) -> str:
    return f'<figure><img alt="{escape.html(title)}" src="data:image/png;base64,{data}"><figcaption>{escape.html(title)}</figcaption></figure>'


def heatmaps(rows: list[Row]) -> list[tuple[str, str]]:
    """One heatmap per (test, modes, size) that has more than one link: senders down, receivers
    across, both in attribution.end_order (by host, then NIC, then device)."""
    groups: dict[tuple[str, str, str, int, str, str], list[Row]] = {}
    for row in rows:
        groups.setdefault((row.test, row.src_mode, row.dst_mode, row.size_bytes, row.load, row.differs), []).append(row)
    order = {end: n for n, end in enumerate(end_order(rows))}
    images = []
    for (test, src_mode, dst_mode, size, load, differs), members in sorted(groups.items()):
        if len(members) < 2:
            continue
        sources, targets, grid, by = _grid(members, order)
        scale = _heatmap(sources, targets, grid, members)
        unit = members[0].unit
        variant = f", {differs}" if differs else ""
        title = (
            f"{test} {src_mode} -> {dst_mode}, {format_size(size)}, links {load}{variant}: median {unit} "
            f"{by} (row: sender); colour {scale}"
        )
        images.append((title, _png(_pyplot().gcf())))
    return images


def _cell(value: float) -> str:
    """A map cell's figure: a tenth from 1 up, two significant figures below (0.014 GB/s never reads 0.0)."""
    return f"{value:.1f}" if abs(value) >= 1 else f"{value:.2g}"


def _heatmap(sources: list[str], targets: list[str], grid: list[list[float]], members: list[Row]) -> str:
    """Draw one map (the current figure); return what its colour scale spans, for the caption. The
    scale runs from 0 to the physical limit where every link carries one (maps compare by colour),
    else over this map's own figures."""
    plt = _pyplot()
    side = max(len(sources), len(targets))
    inch = 0.9 if side <= LABELLED_UP_TO else max(0.05, 12.0 / side)  # a cluster's map stays a page wide
    fig, ax = plt.subplots(figsize=(1.2 + inch * len(targets), 1.0 + inch * 0.66 * len(sources)))
    limits = [row.limit_gbps for row in members]
    unit = members[0].unit
    if unit == "GB/s" and all(limit is not None for limit in limits):
        top = max(limit for limit in limits if limit is not None)
        named = {row.limit for row in members}
        lowest, scale = 0.0, f"0 to the physical limit, {named.pop()}"
        if named:  # more than one
            scale = f"0 to {top:.1f} GB/s, the largest physical limit of these links"
    else:
        figures = [value for line in grid for value in line if value == value]
        lowest, top = min(figures), max(figures)
        scale = f"this map's own range, {lowest:.3g} to {top:.3g} {unit} (not comparable with other maps)"
    cmap = "viridis" if members[0].higher_is_better else "viridis_r"
    image = ax.imshow(grid, cmap=cmap, aspect="auto", vmin=lowest, vmax=top)
    if side <= LABELLED_UP_TO:
        ax.set_xticks(range(len(targets)), [_label(end) for end in targets], rotation=45, ha="right", fontsize=8)
        ax.set_yticks(range(len(sources)), [_label(end) for end in sources], fontsize=8)
        for i, line in enumerate(grid):
            for j, value in enumerate(line):
                known = value == value
                ink = _ink(image.cmap(image.norm(value))) if known else "black"  # a gap shows the page
                ax.text(j, i, _cell(value) if known else "N/A", ha="center", va="center", color=ink, fontsize=7)
    fig.colorbar(image, ax=ax, label=_label(unit))
    return scale


def _ink(rgba: tuple[float, ...]) -> str:
    """Black or white, whichever contrasts more with a cell of colour `rgba` (WCAG relative
    luminance; 0.179 is where the two contrasts are equal)."""

    def linear(channel: float) -> float:
        return channel / 12.92 if channel <= 0.04045 else ((channel + 0.055) / 1.055) ** 2.4

    red, green, blue = (linear(c) for c in rgba[:3])
    return "black" if 0.2126 * red + 0.7152 * green + 0.0722 * blue > 0.179 else "white"


def _size_axis(ax: Any, sizes: list[int]) -> None:
    """Message sizes on a log2 axis, labelled as the tables label them (64KiB, 1MiB)."""
    ax.set_xscale("log", base=2)
    ax.set_xticks(sizes, [format_size(s) for s in sizes], rotation=45, ha="right", fontsize=7)
    from matplotlib.ticker import NullLocator

    ax.xaxis.set_minor_locator(NullLocator())  # no unlabelled 2^n ticks between the sizes
    ax.set_xlabel("message size")


def curves(rows: list[Row]) -> list[tuple[str, str]]:
    """Per test measured at two sizes or more: one line per (memory modes, posting path, validation,
    and `beside` where rows have it), the median over links of each size; on the bandwidth plot the
    list's ceiling (a copy kernel over the same list) and the link's physical limit as lines of their
    own; and the share of the physical limit by size, where known."""
    images = []
    for test in sorted({r.test for r in rows}):
        members = [r for r in rows if r.test == test and r.alone]
        if len({r.size_bytes for r in members}) < 2:
            continue  # a curve needs two sizes
        unit = members[0].unit
        bandwidth = unit == "GB/s"
        ax = _curve(members, lambda r: r.median, f"bandwidth ({unit}, 1e9 B/s)" if bandwidth else f"{test} ({unit})")
        if bandwidth:
            _bounds(ax, members)
        title = f"{test}: {'bandwidth' if bandwidth else unit} against size, a line per memory modes, posting path and validation (median over links)"
        images.append((title, _png(_pyplot().gcf())))
        shared = [r for r in members if r.share is not None]
        if len({r.size_bytes for r in shared}) >= 2:
            ax = _curve(shared, lambda r: 100 * (r.share or 0.0), "% of the link's physical limit", log=False)
            ax.set_ylim(0, 105)
            title = f"{test}: share of the physical limit (NVLink, PCIe, NIC or host copy), a line per memory modes, posting path and validation"
            images.append((title, _png(_pyplot().gcf())))
    return images


def line_of(row: Row) -> str:
    """The curve a row belongs to: its memory modes, how its transfers were posted (plain messages,
    a block list posted by the GPU or the CPU, or the one-message reference a list is measured
    against), whether payloads were checked, and what ran beside it where the row says."""
    settings = dict(row.settings)
    parts = [row.modes]
    if row.posting is not None:
        if row.block_list is None:
            parts.append("one message (reference)")
        else:
            held = Point(row.posting, 0.0, None, row.posting_sms, row.posting_green, row.carveout or 0)
            parts.append(f"list posted by {held.label}")
    parts.append("validated" if settings.get("validated") == "yes" else "not validated")
    if row.compute is not None:  # what ran beside the transfers (--beside)
        parts.append(row.load)
    return ", ".join(parts)


def _curve(members: list[Row], value: Any, label: str, log: bool = True) -> Any:
    """One plot (the current figure): per line (`line_of`), the median of `value` over links by size."""
    _fig, ax = _pyplot().subplots(figsize=(7, 4 if log else 3.5))
    lines: dict[str, dict[int, list[float]]] = {}
    for row in members:
        lines.setdefault(line_of(row), {}).setdefault(row.size_bytes, []).append(value(row))
    for name in sorted(lines):
        sizes = sorted(lines[name])
        ax.plot(sizes, [median(lines[name][s]) for s in sizes], marker="o", label=_label(name))
    _size_axis(ax, sorted({r.size_bytes for r in members}))
    if log:
        ax.set_yscale("log")
    ax.set_ylabel(_label(label))
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    return ax


def _bounds(ax: Any, members: list[Row]) -> None:
    """The list's ceiling by size (per line with one) and each physical limit, as lines of their own."""
    ceilings: dict[str, dict[int, list[float]]] = {}
    for row in members:
        for gbps in row.ceilings or ():
            ceilings.setdefault(line_of(row), {}).setdefault(row.size_bytes, []).append(gbps)
    for name in sorted(ceilings):
        sizes = sorted(ceilings[name])
        ax.plot(sizes, [median(ceilings[name][s]) for s in sizes], linestyle=":", marker="x",
                label=_label(f"{name}: the list's ceiling (a copy kernel)"))  # fmt: skip
    limits = sorted({(r.limit, r.limit_gbps) for r in members if r.limit and r.limit_gbps}, key=lambda item: item[1])
    for limit, gbps in limits[:4]:
        ax.axhline(gbps, linestyle="--", color="grey", linewidth=1)
        ax.plot([], [], linestyle="--", color="grey", label=_label(f"{limit}: the link's limit"))
    ax.legend(fontsize=7)


ANSWERS_DRAWN_UP_TO = 32  # block sizes (per link, load and list) drawn; beyond, the table has them all


def answer_plot(answer: Answer) -> tuple[str, str, list[str]]:
    """One block size's candidates as points of GB/s (y, log: 0.8 and 170 GB/s both read) against the
    model's slowdown (x), each with its range over samples and its interval (or range) over pairs, and its
    name; the budget as a vertical line; the list's contiguous reference and its ceiling as horizontal
    lines. A run with no model beside it is drawn at 1; beside a model, a candidate whose cost was not
    judged is drawn in a panel of its own, hollow, named as such (at x1 it would read as free). Returns the
    caption, the image and the names drawn."""
    plt = _pyplot()
    idle = all(point.slowdown is None for point in answer.points)
    unjudged = [point for point in answer.points if point.slowdown is None and not idle]
    if unjudged:
        fig, (ax, aside) = plt.subplots(1, 2, figsize=(8, 4.2), sharey=True, gridspec_kw={"width_ratios": [5, 1]})
    else:
        fig, ax = plt.subplots(figsize=(7, 4.2))
    judged = sorted((p for p in answer.points if p not in unjudged), key=lambda point: point.gbps)
    drawn = [_draw_point(ax, point, n) for n, point in enumerate(judged)]  # neighbours in GB/s: names apart
    if unjudged:
        drawn += [_draw_unjudged(aside, point, n) for n, point in enumerate(unjudged)]
    ax.axvline(answer.budget, linestyle="--", color="tab:red", linewidth=1,
               label=_label(f"the model's budget: x{answer.budget:.3f} ({budget_words(answer.budget)})"))  # fmt: skip
    for gbps, what, style in (
        (answer.contiguous_gbps, "the contiguous reference (the list's bytes as one message)", "-."),
        (answer.ceiling_gbps, "the list's ceiling (a copy kernel over the list)", ":"),
    ):
        if gbps is not None:
            ax.axhline(gbps, linestyle=style, color="grey", linewidth=1, label=_label(f"{what}: {gbps:.1f} GB/s"))
    ax.set_xlabel("the model's slowdown (x; 1 = no loss)" + (": no model ran beside these" if idle else ""))
    ax.set_ylabel("GB/s (1e9 B/s), log scale")
    ax.set_yscale("log")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=1)  # below: lines stay readable
    title = (
        f"{answer.test} {answer.modes} {answer.link}, {format_size(answer.size_bytes)} blocks ({answer.shape}), "
        f"{answer.load}: GB/s against the model's slowdown, a point per posting path and carve-out "
        "(bars: the range over samples, and the slowdown's 95% interval or its range over pairs)"
    )
    if unjudged:
        title += "; at the right, hollow, their cost to the model not judged: " + "; ".join(
            f"{point.label} {point.gbps:.1f} GB/s ({point.unjudged or 'no pair judged'})" for point in unjudged
        )
    return title, _png(fig), drawn


def _draw_point(ax: Any, point: Point, n: int) -> str:
    """A judged candidate (or one with no model beside it, at 1): its point, bars and name; its name."""
    x = point.slowdown if point.slowdown is not None else 1.0
    low, high = point.interval or point.slowdown_range or (x, x)
    bottom, top = point.gbps_range or (point.gbps, point.gbps)
    ax.errorbar(
        [x], [point.gbps], xerr=[[max(0.0, x - low)], [max(0.0, high - x)]],
        yerr=[[max(0.0, point.gbps - bottom)], [max(0.0, top - point.gbps)]], fmt="o", capsize=3,
    )  # fmt: skip
    shift = (5, 5 if n % 2 == 0 else -10)  # neighbours' names apart
    ax.annotate(_label(short_label(point)), (x, point.gbps), textcoords="offset points", xytext=shift, fontsize=7)
    return point.label


def _draw_unjudged(ax: Any, point: Point, n: int) -> str:
    """A candidate whose cost was not judged: hollow, in the side panel, named 'not judged'."""
    ax.plot([0.0], [point.gbps], marker="o", markerfacecolor="none", color="grey")
    ax.annotate(_label(f"{short_label(point)} (not judged)"), (0.0, point.gbps), textcoords="offset points",
                xytext=(5, 5 if n % 2 == 0 else -10), fontsize=7)  # fmt: skip
    ax.set_xticks([0.0], ["not judged"])
    ax.set_xlim(-0.5, 3.0)
    return point.label


def answer_section(rows: list[Row], budget: float) -> list[str]:
    """The page's lead for block lists: the answer as a table per link and load (its rows: the fastest idle
    and the fastest within the budget per block size, with their costs), its notes and a plot per block
    size; nothing without lists."""
    found = answers(rows, budget, every=True)
    if not found:
        return []
    parts = [
        "<h2>Which posting path</h2>",
        f"<p>Per block size: the fastest path on an idle GPU, and the fastest beside the load whose judged "
        f"slowdown of the model stays within the budget of {escape.html(budget_words(budget))} (--model-budget), "
        "each with its four costs: the model's slowdown (its 95% interval), the SMs it holds, the CPU time and a "
        "kernel's CTA time per descriptor ('-': not recorded).</p>",
    ]
    header = "<tr>" + "".join(f"<th>{escape.html(c)}</th>" for c in TABLE_COLUMNS) + "</tr>"
    for caption, members in table(found):
        parts += [f"<p class='caption'>{escape.html(caption)}</p>", "<table class='answer'>", header]
        parts += ["<tr>" + "".join(f"<td>{escape.html(c)}</td>" for c in row) + "</tr>" for row in members]
        parts.append("</table>")
    parts.append("<ul class='notes'>" + "".join(f"<li>{escape.html(n)}</li>" for n in notes(found)) + "</ul>")
    for title, data, drawn in map(answer_plot, found[:ANSWERS_DRAWN_UP_TO]):
        paths = escape.xml_attribute(";".join(drawn))  # what the plot drew: a browser test reads it
        parts.append(_image(title, data).replace("<figure>", f"<figure class='answer' data-paths={paths}>", 1))
    if len(found) > ANSWERS_DRAWN_UP_TO:
        parts.append(
            f"<p>The first {ANSWERS_DRAWN_UP_TO} of {len(found)} block sizes drawn; the table has them all.</p>"
        )
    return parts


_STYLE = """
body{font-family:system-ui,sans-serif;margin:2em;max-width:1200px}
table{border-collapse:collapse;font-size:13px}td,th{border:1px solid #ccc;padding:3px 6px;text-align:left}
th{background:#eee}figure{display:inline-block;margin:1em}img{max-width:100%}.warn{color:#a40}
svg.cdf{margin:0.5em;font-family:system-ui,sans-serif}
"""

# Marks each image and each CDF with its rendered size once the page has loaded: a browser test reads these.
_SCRIPT = """
window.addEventListener('load', function () {
  var sizes = [];
  document.querySelectorAll('img').forEach(function (img) { sizes.push(img.naturalWidth + 'x' + img.naturalHeight); });
  document.body.setAttribute('data-image-sizes', sizes.join(','));
  var cdfs = [];
  document.querySelectorAll('svg.cdf').forEach(function (svg) {
    var box = svg.getBoundingClientRect();
    cdfs.push(Math.round(box.width) + 'x' + Math.round(box.height));
  });
  document.body.setAttribute('data-cdf-sizes', cdfs.join(','));
  var widest = 0;
  document.querySelectorAll('table.answer').forEach(function (t) { widest = Math.max(widest, t.getBoundingClientRect().width); });
  document.body.setAttribute('data-answer-width', Math.round(widest));
});
"""


LABELLED_UP_TO = 32  # ends per side of a map that get their names and figures written in
PER_END_UP_TO = 64  # ends per side drawn one by one; beyond, a map per pair of hosts
ALL_LINKS_UP_TO = 2000  # rows listed in the page; beyond, the worst of them (the CSV has all)


def _grid(members: list[Row], order: dict[str, int]) -> tuple[list[str], list[str], list[list[float]], str]:
    """Senders, receivers and the figures between them: per end up to PER_END_UP_TO ends a side,
    else per pair of hosts (the median of the links between them); ends in `order` (an end's place,
    attribution.end_order), hosts in the order of their first end there."""
    ends = [r.link.split(" -> ") for r in members]
    if max(len({s for s, _ in ends}), len({d for _, d in ends})) > PER_END_UP_TO:
        hosts = {host: n for n, host in enumerate(dict.fromkeys(end.rpartition(":")[0] for end in order))}
        ends = [[r.src_host, r.dst_host] for r in members]
        by = "per pair of hosts (median of their links)"
        order = hosts
    else:
        by = "per link"
    last = len(order)

    def place(end: str) -> tuple[int, str]:
        return order.get(end, last), end

    sources, targets = sorted({s for s, _ in ends}, key=place), sorted({d for _, d in ends}, key=place)
    row_of, column_of = {s: i for i, s in enumerate(sources)}, {d: j for j, d in enumerate(targets)}
    cells: dict[tuple[int, int], list[float]] = {}
    for (src, dst), r in zip(ends, members, strict=True):
        cells.setdefault((row_of[src], column_of[dst]), []).append(r.median)
    grid = [[float("nan")] * len(targets) for _ in sources]
    for (i, j), values in cells.items():
        grid[i][j] = stats.median(values)
    return sources, targets, grid, by


def _worst_first(rows: list[Row]) -> list[Row]:
    """The rows furthest below (or above, for a time) the median of their class: a cluster's page
    lists these, not a million."""
    ranked = heapq.nsmallest(  # sorted(...)[:ALL_LINKS_UP_TO], without sorting a million
        ALL_LINKS_UP_TO, standings(rows), key=lambda item: item[1] if item[0].higher_is_better else -item[1]
    )
    return [row for row, _off, _size in ranked]


def _distributions(found: list[distribution.Distribution]) -> list[str]:
    """A CDF per link class (the largest DRAWN_UP_TO), then a line per class."""
    drawn = distribution.drawn(found)
    small = [one for one in found if one.links < distribution.DRAWN_FROM]
    parts = ["<h2>Distribution per link class</h2>"]
    if not drawn:
        links = sum(one.links for one in small)
        return [
            *parts,
            f"<p>None drawn: no class has the {distribution.DRAWN_FROM} links a distribution takes "
            f"({len(small)} class(es) of {links} link(s); each link is in the table below).</p>",
        ]
    parts.append(
        "<p>Per class, the share of its links at or below each figure (each link's median over runs), "
        "as % of the class's physical limit where known; the median and the outlier threshold marked.</p>"
    )
    if len(drawn) < len(found) - len(small):
        parts.append(
            f"<p>The {len(drawn)} largest of {len(found) - len(small)} classes drawn; each is listed below.</p>"
        )
    parts.append("<div class='cdfs'>" + "".join(distribution.cdf_svg(one) for one in drawn) + "</div>")
    listed = [one for one in found if one.links >= distribution.DRAWN_FROM]
    parts.append("<ul>" + "".join(f"<li>{escape.html(distribution.summary(one))}</li>" for one in listed) + "</ul>")
    if small:
        parts.append(
            f"<p>{len(small)} class(es) of fewer than {distribution.DRAWN_FROM} links have no distribution "
            f"({sum(one.links for one in small)} link(s): see the table below).</p>"
        )
    return parts


@bulk
def render(
    rows: list[Row],
    sources: list[str],
    problems: list[str],
    fraction: float,
    found: Attribution | None = None,
    budget: float = BUDGET,
) -> str:
    found = found if found is not None else attribute(rows)
    parts = [
        "<!DOCTYPE html><html><head><meta charset='utf-8'><title>rdmabench report</title>",
        f"<style>{_STYLE}</style><script>{_SCRIPT}</script></head><body>",
        "<h1>rdmabench report</h1>",
        f"<p>{len(sources)} results file(s); GB/s = 1e9 bytes/s; medians over runs.</p>",
    ]
    parts += answer_section(rows, budget)
    judged = found.judged > 0  # a run with no link to judge against its class: no suspects, no distributions
    if judged:
        parts.append(
            "<h2>Suspects</h2><ul class='suspects'>"
            + "".join(f"<li>{escape.html(line)}</li>" for line in found.lines())
            + "</ul>"
        )
    else:
        parts.append(f"<p class='unjudged'>No link judged against its class: {escape.html(_unjudged(found))}</p>")
    if problems:
        parts.append(
            "<h2>Files not used</h2><ul>"
            + "".join(f"<li class='warn'>{escape.html(p)}</li>" for p in problems)
            + "</ul>"
        )
    parts += _judged_sections(rows, fraction) if judged else []
    parts.append("<h2>Per-link matrices</h2>")
    maps = heatmaps(rows)
    parts += [_image(t, d) for t, d in maps] or ["<p>No (test, modes, size) with more than one link.</p>"]
    parts.append("<h2>Against message size</h2>")
    parts += [_image(t, d) for t, d in curves(rows)] or [
        "<p>No curves: no test here was measured alone at two message sizes or more.</p>"
    ]
    listed = rows if len(rows) <= ALL_LINKS_UP_TO else _worst_first(rows)
    heading = "All links" if listed is rows else f"The {len(listed)} worst of {len(rows)} links (against their class)"
    parts.append(f"<h2>{heading}</h2><table><tr>" + "".join(f"<th>{c}</th>" for c in COLUMNS) + "</tr>")
    for row in listed:
        parts.append("<tr>" + "".join(f"<td>{escape.html(cell)}</td>" for cell in cells(row)) + "</tr>")
    parts.append("</table>")
    parts.append("<h2>Sources</h2><ul>" + "".join(f"<li>{escape.html(s)}</li>" for s in sources) + "</ul>")
    parts.append("</body></html>")
    return "\n".join(parts)


def _unjudged(found: Attribution) -> str:
    """Why nothing was judged, in one line: every class of links too small."""
    links = sum(one.links for one in found.classes)
    return (
        f"each of its {len(found.classes)} class(es) ({links} link(s)) has fewer than "
        f"{found.params.floors.min_class_links} links, the fewest a judgement takes: no suspects, outliers "
        "or distributions."
    )


def _judged_sections(rows: list[Row], fraction: float) -> list[str]:
    """The distribution per link class and the outliers: only where some link was judged."""
    parts = _distributions(class_distributions(rows, fraction))
    parts.append(
        "<h2>Outliers</h2><ul>"
        + "".join(f"<li>{escape.html(line.strip())}</li>" for line in outlier_lines(outliers(rows, fraction), fraction))
        + "</ul>"
    )
    return parts
