"""The HTML page's plots, drawn for real (matplotlib, Agg) and read back from the figures: labels
readable on every cell, colour scales anchored at the physical limit, sizes named as the tables name
them, no caption repeated as a plot title, no empty section; and the CSV's load column."""

from __future__ import annotations

import csv
import io
from typing import Any

import pytest

from rdmabench.results.files.rows import Row, aggregate
from rdmabench.results.reports import html
from rdmabench.results.reports.formats import format_csv, format_markdown, format_table

NVLINK = {"gbps": 478.125, "kind": "NVLink", "detail": "18 x NVLink 4", "measured": False}


def _entry(src: int, dst: int, size: int, value: float, **more: Any) -> dict[str, Any]:
    entry = {
        "test": "bw", "src_rank": src, "dst_rank": dst, "src_mode": "device", "dst_mode": "device",
        "size_bytes": size, "bandwidth_gbps": value, "samples": [value], "unit": "GB/s", "validated": True,
        "transport": "cuda_ipc/cuda", "src_host": "n0", "dst_host": "n0", "src_gpu": src, "dst_gpu": dst,
        "link_limit": NVLINK, "share_of_limit": value / NVLINK["gbps"],
    }  # fmt: skip
    entry.update(more)
    return entry


def _rows(sizes: tuple[int, ...], **more: Any) -> list[Row]:
    values = {(0, 1): 470.0, (1, 0): 60.0, (0, 2): 300.0, (2, 0): 450.0, (1, 2): 20.0, (2, 1): 380.0}
    entries = [_entry(s, d, size, v * (1 + size / (1 << 30)), **more) for size in sizes for (s, d), v in values.items()]
    return aggregate([("generated", {"metadata": {}, "results": entries})])


@pytest.fixture
def figures(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Every figure the page draws, kept open instead of encoded."""
    drawn: list[Any] = []
    monkeypatch.setattr(html, "_png", lambda fig: drawn.append(fig) or "")
    return drawn


def test_heatmap_labels_read_on_their_cells_and_the_scale_is_the_limit(figures: list[Any]) -> None:
    ((title, _data),) = html.heatmaps(_rows((1 << 20,)))
    (ax, _bar) = figures[0].axes
    image = ax.images[0]
    assert (image.norm.vmin, image.norm.vmax) == (0.0, NVLINK["gbps"])  # anchored: maps compare by colour
    assert "colour 0 to the physical limit, NVLink 478.1 GB/s" in title
    inks = {text.get_text(): text.get_color() for text in ax.texts}
    for text, ink in inks.items():
        if text != "N/A" and float(text) >= 0.75 * NVLINK["gbps"]:  # viridis' light end: yellow, light green
            assert ink == "black", text
        elif text != "N/A" and float(text) <= 0.3 * NVLINK["gbps"]:  # its dark end: purple, blue
            assert ink == "white", text
    inks = set(inks.values())
    assert inks == {"black", "white"}  # a light cell (470 GB/s, yellow) gets black, a dark one white
    assert ax.get_title() == ""  # the caption says it, once


def test_a_map_without_a_limit_says_its_scale(figures: list[Any]) -> None:
    ((title, _data),) = html.heatmaps(_rows((1 << 20,), link_limit=None, share_of_limit=None))
    image = figures[0].axes[0].images[0]
    assert (image.norm.vmin, image.norm.vmax) == pytest.approx((20.0 * 1.001, 470.0 * 1.001), rel=1e-3)
    assert "colour this map's own range, 20 to 470 GB/s (not comparable with other maps)" in title


def test_size_axes_are_labelled_as_the_tables_are(figures: list[Any]) -> None:
    titles = [title for title, _ in html.curves(_rows((8, 65536, 1 << 20)))]
    assert len(titles) == 2  # bandwidth, share of the limit
    for fig in figures:
        ax = fig.axes[0]
        assert [t.get_text() for t in ax.get_xticklabels()] == ["8", "64KiB", "1MiB"]
        assert ax.get_title() == ""


def test_one_size_leaves_no_empty_section() -> None:
    rows = _rows((1 << 20,))
    assert html.curves(rows) == []  # one point is no curve
    page = html.render(rows, ["generated"], [], 0.2)
    section = page.split("<h2>Against message size</h2>")[1].split("<h2>")[0]
    assert "No curves: no test here was measured alone at two message sizes or more." in section


def test_loaded_and_unloaded_rows_differ_in_every_table() -> None:
    rows = _rows((1 << 20,)) + _rows((1 << 20,), concurrent_links=6, pattern="all-pairs")
    found = list(csv.DictReader(io.StringIO(format_csv(rows))))
    assert {r["load"] for r in found} == {"alone", "all-pairs, 6 links"}
    assert "all-pairs, 6 links" in format_markdown(rows, "none", 0.2)
    assert "all-pairs, 6 links" in format_table(rows, "none", 0.2)


def _small_run() -> list[Row]:
    """Two GPUs, three sizes: plain messages (validated or not), block lists posted by the GPU and by
    the CPU with their ceilings, and the one-message reference a list is measured against."""

    def blocks(count: int, posted: str, ceiling: float | None) -> dict[str, Any]:
        found = {"count": count, "layout": "contiguous", "batch": 1, "posted_by": posted}
        return found | ({"ceiling_gbps": ceiling} if ceiling else {})

    kinds: list[tuple[float, dict[str, Any]]] = [
        (1.0, {}),
        (0.5, {"validated": False}),
        (0.8, {"blocks": blocks(64, "gpu", 420.0)}),
        (0.6, {"blocks": blocks(64, "cpu", 410.0)}),
        (0.9, {"blocks": blocks(1, "cpu", None)}),
    ]
    entries = [
        _entry(s, d, size, 300.0 * factor * (1 + size / (1 << 21)), **more)
        for factor, more in kinds
        for size in (4096, 65536, 1 << 20)
        for s, d in ((0, 1), (1, 0))
    ]
    return aggregate([("generated", {"metadata": {}, "results": entries})])


def test_curves_draw_a_line_per_path_and_validation_and_the_bounds(figures: list[Any]) -> None:
    """GPU- and CPU-posted lists, validated and unvalidated runs and the one-message reference were
    one zigzag line: each is its own line now, rising with size, with the ceiling and the limit."""
    html.curves(_small_run())
    ax = figures[0].axes[0]
    labels = ax.get_legend_handles_labels()[1]
    lines = {
        "device->device, validated", "device->device, not validated", "device->device, list posted by gpu, validated",
        "device->device, list posted by cpu, validated", "device->device, one message (reference), validated",
    }  # fmt: skip
    assert lines <= set(labels), labels
    assert {label for label in labels if label.endswith("the list's ceiling (a copy kernel)")} == {
        "device->device, list posted by gpu, validated: the list's ceiling (a copy kernel)",
        "device->device, list posted by cpu, validated: the list's ceiling (a copy kernel)",
    }
    assert [label for label in labels if label.endswith("the link's limit")] == ["NVLink 478.1 GB/s: the link's limit"]
    for line in ax.get_lines():
        if line.get_label() in lines:
            assert list(line.get_xdata()) == [4096, 65536, 1 << 20]  # one point a size: no zigzag
            assert list(line.get_ydata()) == sorted(line.get_ydata())


def test_a_small_run_without_links_to_judge_has_no_suspects_nor_distributions() -> None:
    """Five kinds of run on two GPUs were 11 'too few to judge' lines and 30 one-link plots, then a
    Suspects and a Distribution section saying at length there was nothing to say: now one line."""
    page = html.render(_small_run(), ["generated"], [], 0.2)
    assert '<svg class="cdf"' not in page and "<h2>Suspects</h2>" not in page and "Distribution" not in page
    assert "<h2>Outliers</h2>" not in page
    (said,) = [line for line in page.splitlines() if "class='unjudged'" in line]
    assert "each of its 5 class(es) (10 link(s)) has fewer than" in said


def test_a_small_run_without_links_to_judge_has_no_distribution_in_text_or_markdown() -> None:
    """The table and Markdown reports as the page: the suspects' one line says why nothing was judged,
    and no distribution per class of one or two links, nor outliers, follow it."""
    rows = _small_run()
    for text in (format_table(rows, "none", 0.2), format_markdown(rows, "none", 0.2)):
        assert "no suspect can be named" in text and "istribution per link class" not in text, text
        assert "outlier" not in text.lower(), text


def test_a_map_cell_of_a_small_figure_never_reads_zero(figures: list[Any]) -> None:
    """GENERATED: pageable links at 0.014-0.024 GB/s (a matrix of such cells all read 0.0)."""
    entries = [
        _entry(s, d, 4096, v, link_limit=None, share_of_limit=None)
        for (s, d), v in {(0, 1): 0.014, (1, 0): 0.024, (0, 2): 0.019, (2, 0): 350.0}.items()
    ]
    html.heatmaps(aggregate([("generated", {"metadata": {}, "results": entries})]))
    cells = {text.get_text() for text in figures[0].axes[0].texts} - {"N/A"}
    assert cells == {"0.014", "0.024", "0.019", "350.0"}
