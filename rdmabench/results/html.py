"""One self-contained HTML page: per-link heatmaps, bandwidth-vs-size curves per memory mode, shares
of the physical limit, and the aggregate table. Plots are PNG images embedded in the page."""

from __future__ import annotations

import base64
import html
import io
import statistics
from typing import Any

from ..units import format_size
from .report import _COLUMNS, Row, _cells, _outlier_lines, outliers


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _png(fig: Any) -> str:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110, bbox_inches="tight")
    _pyplot().close(fig)
    return base64.b64encode(buffer.getvalue()).decode()


def _image(title: str, data: str) -> str:
    return f'<figure><img alt="{html.escape(title)}" src="data:image/png;base64,{data}"><figcaption>{html.escape(title)}</figcaption></figure>'


def heatmaps(rows: list[Row]) -> list[tuple[str, str]]:
    """One heatmap per (test, modes, size) that has more than one link: senders down, receivers across."""
    plt = _pyplot()
    groups: dict[tuple[str, str, str, int, str, str], list[Row]] = {}
    for row in rows:
        groups.setdefault((row.test, row.src_mode, row.dst_mode, row.size_bytes, row.load, row.differs), []).append(row)
    images = []
    for (test, src_mode, dst_mode, size, load, differs), members in sorted(groups.items()):
        if len(members) < 2:
            continue
        sources = sorted({r.link.split(" -> ")[0] for r in members})
        targets = sorted({r.link.split(" -> ")[1] for r in members})
        grid = [[float("nan")] * len(targets) for _ in sources]
        for r in members:
            src, dst = r.link.split(" -> ")
            grid[sources.index(src)][targets.index(dst)] = r.median
        fig, ax = plt.subplots(figsize=(1.2 + 0.9 * len(targets), 1.0 + 0.6 * len(sources)))
        image = ax.imshow(grid, cmap="viridis" if members[0].higher_is_better else "viridis_r")
        ax.set_xticks(range(len(targets)), targets, rotation=45, ha="right", fontsize=8)
        ax.set_yticks(range(len(sources)), sources, fontsize=8)
        for i, line in enumerate(grid):
            for j, value in enumerate(line):
                text = "N/A" if value != value else f"{value:.1f}"
                ax.text(j, i, text, ha="center", va="center", color="white", fontsize=7)
        unit = members[0].unit
        fig.colorbar(image, ax=ax, label=unit)
        variant = f", {differs}" if differs else ""
        title = (
            f"{test} {src_mode} -> {dst_mode}, {format_size(size)}, links {load}{variant}: median {unit} (row: sender)"
        )
        ax.set_title(title, fontsize=9)
        images.append((title, _png(fig)))
    return images


def curves(rows: list[Row]) -> list[tuple[str, str]]:
    """Per test: median over links of each size, one line per memory-mode pair; and the share of
    the physical limit by size, where known."""
    plt = _pyplot()
    images = []
    for test in sorted({r.test for r in rows}):
        members = [r for r in rows if r.test == test and r.load == "alone"]
        if not members:
            continue
        fig, ax = plt.subplots(figsize=(7, 4))
        for modes in sorted({r.modes for r in members}):
            sizes = sorted({r.size_bytes for r in members if r.modes == modes})
            values = [
                statistics.median(r.median for r in members if r.modes == modes and r.size_bytes == s) for s in sizes
            ]
            ax.plot(sizes, values, marker="o", label=modes)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        unit = members[0].unit
        ax.set_xlabel("message size (bytes)")
        bandwidth = unit == "GB/s"
        ax.set_ylabel(f"bandwidth ({unit}, 1e9 B/s)" if bandwidth else f"{test} ({unit})")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
        title = f"{test}: {'bandwidth' if bandwidth else unit} against size, per memory mode (median over links)"
        ax.set_title(title, fontsize=9)
        images.append((title, _png(fig)))
        shared = [r for r in members if r.share is not None]
        if shared:
            fig, ax = plt.subplots(figsize=(7, 3.5))
            for modes in sorted({r.modes for r in shared}):
                sizes = sorted({r.size_bytes for r in shared if r.modes == modes})
                values = [
                    100 * statistics.median(r.share or 0.0 for r in shared if r.modes == modes and r.size_bytes == s)
                    for s in sizes
                ]
                ax.plot(sizes, values, marker="o", label=modes)
            ax.set_xscale("log", base=2)
            ax.set_ylim(0, 105)
            ax.set_xlabel("message size (bytes)")
            ax.set_ylabel("% of the link's physical limit")
            ax.grid(True, alpha=0.3)
            ax.legend(fontsize=8)
            title = f"{test}: share of the physical limit (NVLink, PCIe, NIC or host copy) per memory mode"
            ax.set_title(title, fontsize=9)
            images.append((title, _png(fig)))
    return images


_STYLE = """
body{font-family:system-ui,sans-serif;margin:2em;max-width:1200px}
table{border-collapse:collapse;font-size:13px}td,th{border:1px solid #ccc;padding:3px 6px;text-align:left}
th{background:#eee}figure{display:inline-block;margin:1em}img{max-width:100%}.warn{color:#a40}
"""

# Marks each image with its rendered size once the page has loaded: a browser test reads these.
_SCRIPT = """
window.addEventListener('load', function () {
  var sizes = [];
  document.querySelectorAll('img').forEach(function (img) { sizes.push(img.naturalWidth + 'x' + img.naturalHeight); });
  document.body.setAttribute('data-image-sizes', sizes.join(','));
});
"""


def render(rows: list[Row], sources: list[str], problems: list[str], fraction: float) -> str:
    parts = [
        "<!DOCTYPE html><html><head><meta charset='utf-8'><title>rdmabench report</title>",
        f"<style>{_STYLE}</style><script>{_SCRIPT}</script></head><body>",
        "<h1>rdmabench report</h1>",
        f"<p>{len(sources)} results file(s); GB/s = 1e9 bytes/s; medians over runs.</p>",
    ]
    if problems:
        parts.append(
            "<h2>Files not used</h2><ul>"
            + "".join(f"<li class='warn'>{html.escape(p)}</li>" for p in problems)
            + "</ul>"
        )
    parts.append(
        "<h2>Outliers</h2><ul>"
        + "".join(
            f"<li>{html.escape(line.strip())}</li>" for line in _outlier_lines(outliers(rows, fraction), fraction)
        )
        + "</ul>"
    )
    parts.append("<h2>Per-link matrices</h2>")
    maps = heatmaps(rows)
    parts += [_image(t, d) for t, d in maps] or ["<p>No (test, modes, size) with more than one link.</p>"]
    parts.append("<h2>Against message size</h2>")
    parts += [_image(t, d) for t, d in curves(rows)]
    parts.append("<h2>All links</h2><table><tr>" + "".join(f"<th>{c}</th>" for c in _COLUMNS) + "</tr>")
    for row in rows:
        parts.append("<tr>" + "".join(f"<td>{html.escape(cell)}</td>" for cell in _cells(row)) + "</tr>")
    parts.append("</table>")
    parts.append("<h2>Sources</h2><ul>" + "".join(f"<li>{html.escape(s)}</li>" for s in sources) + "</ul>")
    parts.append("</body></html>")
    return "\n".join(parts)
