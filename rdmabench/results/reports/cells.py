"""A row as text: the report's columns and cells, the outlier lines and the distribution per link class, as every text format (the table, markdown, csv, the HTML page, compare) shows them."""

from __future__ import annotations

from collections.abc import Callable

from ... import escape
from ...units import format_size
from ..files.rows import CULPRITS_LISTED, Row, classes, culprits
from . import distribution


def class_distributions(rows: list[Row], fraction: float) -> list[distribution.Distribution]:
    """How the links of each class spread (see distribution.py), by class."""
    return distribution.distributions(classes(rows).items(), fraction)


COLUMNS = (
    "test",
    "modes",
    "size",
    "link",
    "class",
    "load",
    "settings",
    "runs",
    "median",
    "min",
    "max",
    "spread",
    "p99 us",
    "p99.9 us",
    "share",
    "CPU s/GB",
    "wire",
    "transport",
)


WIDTH = 120  # a report's lines by default (--wide: every column, as wide as it takes)
LEFT_OUT = (
    "min",
    "max",
    "CPU s/GB",
    "wire",
    "transport",
    "p99.9 us",
    "share",
)  # what a narrow table leaves to --wide, in order


def fitted(
    rows: list[Row], width: Callable[[tuple[str, ...], list[list[str]]], int], wide: bool = False
) -> tuple[list[str], tuple[str, ...], list[list[str]]]:
    """The table of `rows` within WIDTH (`width`: a format's line width of a header and its columns): as it
    is where it fits or `wide`; else what every row shares said once above it, a block list's settings
    in short (its list and who posted it), and the columns of LEFT_OUT left to --wide, until it fits.
    Returns the lines above the table, its header and its columns."""
    header: tuple[str, ...] = COLUMNS
    columns = cell_columns(rows)
    if wide or width(header, columns) <= WIDTH:
        return [], header, columns
    said: list[str] = []
    if len(rows) > 1:  # what every row shares: once, above the table
        shared = [n for n, (name, column) in enumerate(zip(header, columns, strict=True))
                  if name != "median" and len(set(column)) == 1]  # fmt: skip
        said = [f"{header[n]}: {columns[n][0]}" for n in shared]
        header = tuple(name for n, name in enumerate(header) if n not in shared)
        columns = [column for n, column in enumerate(columns) if n not in shared]
    if "settings" in header and any(row.posting is not None for row in rows):
        columns[header.index("settings")] = [short_settings(row) for row in rows]
    left: list[str] = []
    for name in LEFT_OUT:
        if width(header, columns) <= WIDTH or name not in header:
            continue
        at = header.index(name)
        header, left = header[:at] + header[at + 1 :], [*left, name]
        del columns[at]
    lines = ["; ".join(said)] if said else []
    if left:
        lines.append(f"(--wide: {', '.join(left)})")
    return lines, header, columns


def short_settings(row: Row) -> str:
    """A row's settings in short: a block list's list and who posted it (its SMs, the model's carve-out),
    then the other settings that tell it from its link's other rows; '-' where there are none."""
    if row.posting is None:
        return row.differs or "-"
    held = f" {row.posting_sms} SMs{' green' if row.posting_green else ''}" if row.posting_sms is not None else ""
    carved = f", carve {row.carveout}" if row.carveout else ""
    others = [f"{k}={v}" for k, v in row.settings if k not in ("blocks", "carveout") and f"{k}={v}" in row.differs]
    return ", ".join([f"{row.block_list or 'one message'}: {row.posting}{held}{carved}", *others])


def text_width(header: tuple[str, ...], columns: list[list[str]]) -> int:
    """The width of an aligned text table (escape.aligned: cells two spaces apart)."""
    widths = [max(len(name), max(map(len, column), default=0)) for name, column in zip(header, columns, strict=True)]
    return sum(widths) + 2 * (len(widths) - 1)


def markdown_width(header: tuple[str, ...], columns: list[list[str]]) -> int:
    """The width of a Markdown table's longest line ('| a | b |': cells unpadded)."""
    rows = [header, *zip(*columns, strict=True)] if columns else [header]
    return max(sum(map(len, cells)) + 3 * len(cells) + 1 for cells in rows)


def cells(row: Row) -> list[str]:
    return [column[0] for column in cell_columns([row])]


def cell_columns(rows: list[Row]) -> list[list[str]]:
    """The cells of `rows` under COLUMNS, column by column: a million rows format in seconds."""
    sizes: dict[int, str] = {}
    joined: dict[frozenset[str], str] = {}
    medians = [row.median for row in rows]
    lows = [min(row.values) for row in rows]
    highs = [max(row.values) for row in rows]
    shares = [row.share for row in rows]
    return [
        [row.test for row in rows],
        [f"{row.src_mode}->{row.dst_mode}" for row in rows],
        [sizes.get(row.size_bytes) or sizes.setdefault(row.size_bytes, format_size(row.size_bytes)) for row in rows],
        [row.link for row in rows],
        [row.link_class for row in rows],
        [row.load for row in rows],
        [row.differs or "-" for row in rows],
        [str(len(row.values)) for row in rows],
        [f"{_figure(median)} {row.unit}" for median, row in zip(medians, rows, strict=True)],
        [_figure(low) for low in lows],
        [_figure(high) for high in highs],
        [f"{row.spread:.1%}" for row in rows],  # a single run's across its own samples
        *_tail_columns(rows),
        [f"{share:.0%}" if share is not None else "-" for share in shares],
        [_cpu_cell(row) for row in rows],
        [f"{row.wire_ratio:.2f} {row.wire_dev}" if row.wire_dev else "-" for row in rows],
        [
            joined.get(row.transports) or joined.setdefault(row.transports, ", ".join(sorted(row.transports)) or "-")
            for row in rows
        ],
    ]


def _figure(value: float) -> str:
    """A figure to the thousandth, or to three significant figures below a tenth (0.00041 never reads 0.000)."""
    return f"{value:.3f}" if abs(value) >= 0.1 or value == 0 else f"{value:.3g}"


def _tail_columns(rows: list[Row]) -> list[list[str]]:
    """A block list's p99 and p99.9 of transfer times (us, the median over runs); '-' for other rows."""
    tails = [row.tail_us for row in rows]
    return [[f"{tail[i]:.1f}" if tail else "-" for tail in tails] for i in (0, 1)]


def _cpu_cell(row: Row) -> str:
    """'src/dst' CPU seconds per GB, or '-'."""
    cost = row.cpu_s_per_gb
    return f"{cost['src']:.3g}/{cost['dst']:.3g}" if cost else "-"


OUTLIERS_LISTED = 100  # worst first; a cluster with a bad switch has thousands


def outlier_lines(
    found: list[tuple[Row, float]], fraction: float, name: Callable[[str], str] = escape.visible
) -> list[str]:
    """The outliers, a line each, and the parts they touch most; every name from a file through
    `name` (the output's escape: escape.visible, escape.markdown)."""
    if not found:
        return [f"no outliers: every link within {fraction:.0%} of the median of its class"]
    lines = [f"{len(found)} outlier(s), more than {fraction:.0%} worse than the median of their class:"]
    for row, off in found[:OUTLIERS_LISTED]:
        what = f"{row.link} ({row.link_class}) {row.test} {row.modes}"
        lines.append(f"  {name(what)} {format_size(row.size_bytes)}: {row.median:.3f} {name(row.unit)}, {off:+.0%}")
    if len(found) > OUTLIERS_LISTED:
        lines.append(f"  ... and {len(found) - OUTLIERS_LISTED} more, less far off (all of them: --format json or csv)")
    if len(found) > 1:
        touched = culprits([row for row, _off in found])
        for what, key in (("node", "nodes"), ("GPU", "gpus"), ("NIC", "nics")):
            if touched[key]:
                top = ", ".join(
                    f"{name(part)} ({count})" for part, count in list(touched[key].items())[:CULPRITS_LISTED]
                )
                lines.append(f"  outlier links per {what}, most first: {top}")
    return lines
