"""Reports at cluster scale: the quick paths (records folded without expanding entries, rows written
as JSON without json.dumps, p-values in bulk) give what the plain ones give, and the distribution
per link class, on GENERATED documents (marked so in their metadata) with planted slow links."""

from __future__ import annotations

import csv
import gc
import io
import json
import math
import statistics
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from rdmabench import stats
from rdmabench.errors import ResultsFileError
from rdmabench.results.files import compact
from rdmabench.results.files.document import load
from rdmabench.results.files.rows import Filters, aggregate, outliers, standings
from rdmabench.results.reports import distribution, formats
from rdmabench.results.reports.cells import class_distributions
from rdmabench.results.reports.formats import format_json, format_markdown, format_table
from rdmabench.results.reports.html import render
from rdmabench.results.verdicts.attribution import attribute
from rdmabench.results.verdicts.compare import compare, format_changes
from rdmabench.results.verdicts.outcome import Checked
from rdmabench.results.verdicts.verdict import judge, parse_expect
from rdmabench.stats import percentile

from .conftest import browse, million_sources, needs_chromium, run_cli_here

NVLINK = {"gbps": 478.125, "kind": "NVLink", "detail": "18 x NVLink 4", "measured": False}
NIC = {"gbps": 50.0, "kind": "NIC", "detail": "400 Gb/sec (4X NDR)", "measured": False}


def _entry(test: str, src: int, dst: int, modes: str, size: int, value: float, **more: Any) -> dict[str, Any]:
    field = "latency_us" if test == "lat" else "bandwidth_gbps"
    entry = {
        "test": test, "src_rank": src, "dst_rank": dst, "src_mode": modes, "dst_mode": modes, "size_bytes": size,
        field: value, "samples": [value * 0.99, value, value * 1.01], "unit": "us" if test == "lat" else "GB/s",
        "validated": True, "transport": "cuda_ipc/cuda", "engine": "native", "window": 2,
        "src_host": f"n{src // 8}", "dst_host": f"n{dst // 8}", "src_gpu": src % 8, "dst_gpu": dst % 8,
    }  # fmt: skip
    limit = more.pop("limit", None)
    if limit is not None:
        entry.update(link_limit=limit, share_of_limit=value / limit["gbps"])
    entry.update(more)
    return entry


def _classes_doc() -> dict[str, Any]:
    """Four link classes: NVLink within nodes (three links planted at half speed), NIC between
    nodes, latency within nodes (no limit), and a class of two links (no outlier threshold)."""
    entries = []
    for k, (src, dst) in enumerate((s, d) for s in range(16) for d in range(16) if s != d and s // 8 == d // 8):
        share = 0.4 if k in (3, 50, 77) else 0.78 + 0.001 * (k % 40)
        entries.append(_entry("bw", src, dst, "device", 1 << 28, share * NVLINK["gbps"], limit=NVLINK))
    for k, src in enumerate(range(8)):
        for dst in range(8, 14):
            entries.append(_entry("bw", src, dst, "device", 1 << 28, 40.0 + k + 0.1 * dst, limit=NIC))
    entries += [_entry("lat", s, s + 1, "pageable", 8, 2.0 + 0.1 * s) for s in range(7)]
    entries += [_entry("bw", 0, 1, "pinned", 1 << 20, 20.0), _entry("bw", 1, 0, "pinned", 1 << 20, 21.0)]
    metadata = {"generated": "made by tests/test_report_scale.py: link classes with planted slow links"}
    return {"schema": {"name": "rdmabench-results", "version": 1}, "metadata": metadata, "results": entries}


def test_distributions_per_link_class_in_every_format() -> None:
    doc = _classes_doc()
    rows = aggregate([("generated", doc)])
    found = class_distributions(rows, 0.2)
    assert [(d.key[0], d.key[4], d.links, d.unit) for d in found] == [  # by class: test, modes, size, link class
        ("bw", "inter-node", 48, distribution.SHARE),
        ("bw", "intra-node", 112, distribution.SHARE),
        ("bw", "intra-node", 2, "GB/s"),
        ("lat", "intra-node", 7, "us"),
    ]
    nic, nvlink, pair, lat = found
    shares = sorted(e["share_of_limit"] for e in doc["results"] if e.get("link_limit") == NVLINK)
    expected = {"min": shares[0], "p1": percentile(shares, 1), "p5": percentile(shares, 5)}
    expected |= {"p50": statistics.median(shares), "p95": percentile(shares, 95), "max": shares[-1]}
    assert nvlink.percentiles() == pytest.approx(expected, rel=1e-12)
    assert nvlink.limit == "NVLink 478.1 GB/s" and nvlink.threshold == pytest.approx(nvlink.median * 0.8)
    planted = [(row, off) for row, off in outliers(rows, 0.2) if row.limit_kind == "NVLink"]
    assert nvlink.outliers == len(planted) == 3 and nic.outliers == 0 and lat.outliers == 0
    assert lat.threshold == pytest.approx(lat.median * 1.2) and not lat.higher_is_better  # a time: above is worse
    assert pair.threshold is None and pair.outliers == 0  # two links have no majority to stand out from
    counts, edges = nvlink.histogram()
    assert len(counts) == distribution.BINS and sum(counts) == 112 and counts[0] == 3  # the planted links
    assert edges[0] == shares[0] and edges[-1] == shares[-1]
    published = json.loads(format_json(rows, 0.2, []))["distributions"]
    assert [d["links"] for d in published] == [48, 112, 2, 7]
    assert published[1]["p5"] == pytest.approx(expected["p5"]) and published[1]["histogram"]["counts"] == counts
    table = format_table(rows, "none", 0.2)
    assert sum(line.startswith("  bw ") or line.startswith("  lat ") for line in table.splitlines()) >= 4
    assert "112 links; min 40.0, p1 40.0" in table and "(% of NVLink 478.1 GB/s); outlier threshold" in table
    assert table.count("| ") == 0 and "3 below" in table
    markdown = format_markdown(rows, "none", 0.2)
    assert markdown.count("| bw device->device 256MiB") == 2 and "| lat pageable->pageable 8 intra-node" in markdown
    page = render(rows, ["generated"], [], 0.2)
    assert page.count('<svg class="cdf"') == 3  # a class of 2 links has no distribution: said in a line
    for one in (nic, nvlink, lat):
        assert f'data-class="{one.label}" data-links="{one.links}"' in page.replace("&gt;", ">")
    assert "1 class(es) of fewer than 6 links have no distribution (2 link(s)" in page


def _generated(directory: Path, ranks: int = 64) -> Path:
    from devtools.million import generate

    path = directory / f"generated-{ranks}.json"
    generate(str(path), ranks, 8, million_sources())
    return path


def _odd_records(path: Path) -> None:
    """Records the quick path must leave to the plain one: an end that is not its rank's usual,
    integer samples, a screen's re-measure, no share; and one record's link twice (one run: the
    first counts)."""
    links = Path(compact.links_path(str(path)))
    lines = links.read_text().splitlines()
    records = [json.loads(line) for line in lines]
    records[5]["src_host"] = "elsewhere"
    records[6]["samples"] = [int(v) for v in records[6]["samples"]]
    records[7]["remeasured_from"] = 1.5
    records[8].pop("share", None)
    records.append(dict(records[9], samples=[v * 0.5 for v in records[9]["samples"]]))
    links.write_text("".join(json.dumps(r) + "\n" for r in records))
    _count_as_written(path)


def _count_as_written(path: Path) -> None:
    """The summary's count made the links file's, as an edit that knows the format would."""
    summary = json.loads(path.read_text())
    summary["links"]["count"] = len(Path(compact.links_path(str(path))).read_text().splitlines())
    path.write_text(json.dumps(summary))


def test_records_fold_as_expanded_entries(tmp_path: Path) -> None:
    path = _generated(tmp_path)
    _odd_records(path)
    quick = aggregate([("a", load(str(path), lazy=True))])
    plain = aggregate([("a", load(str(path)))])  # a list: every entry expanded and checked
    assert isinstance(load(str(path), lazy=True)["results"], compact.LazyResults)
    assert len(quick) == 64 * 63 and quick == plain  # every field of every row, samples and NICs included
    assert any(row.load == "alone, re-measured after the screen" for row in quick)
    assert any(row.src_host == "elsewhere" for row in quick) and max(len(row.values) for row in quick) == 1
    filters = Filters(sizes=(1 << 20,), link_classes=("inter-node",), hosts=("node0001",))
    assert aggregate([("a", load(str(path), lazy=True))], filters) == aggregate([("a", load(str(path)))], filters)


@pytest.mark.parametrize(
    ("bad", "says"),
    [
        (lambda last: '{"src": 0, "dst": 1, "profile": 7}', "line 4033 is not a link record"),
        (lambda last: "not json", "line 4033 is not a link record"),
        (
            lambda last: json.dumps(dict(last, samples=[True, 1.0])),
            r"line 4033 is not a link record: samples\[0\] is true, not a number",
        ),
        (lambda last: json.dumps(dict(last, size=0)), "line 4033 is not a link record: size is 0: below its minimum 1"),
        # Figures no link can have, in records the quick path reads: once folded, or dropped without a word.
        (
            lambda last: json.dumps(dict(last, samples=[1.0, math.nan])),
            "line 4033 is not a link record \\(NaN is not a JSON number\\)",
        ),
        (
            lambda last: json.dumps(dict(last, samples=[math.inf, 1.0])),
            "line 4033 is not a link record \\(Infinity is not a JSON number\\)",
        ),
        (
            lambda last: json.dumps(dict(last, samples=[-2.0, -2.0])),
            r"line 4033 is not a link record: samples\[0\] is -2.0: not above 0",
        ),
        (
            lambda last: json.dumps(dict(last, samples=[2.0, -1.0, 3.0])),
            r"line 4033 is not a link record: samples\[1\] is -1.0: not above 0",
        ),
        (lambda last: json.dumps(dict(last, samples=[1e30, 1e30])), r"line 4033.bandwidth_gbps holds 1e\+30 GB/s"),
        (
            lambda last: json.dumps(dict(last, agg=-1.0, agg_samples=[1.0])),
            "line 4033 is not a link record: agg is -1.0: not above 0",
        ),
    ],
)
def test_a_bad_record_after_good_ones_is_named(tmp_path: Path, bad: Any, says: str) -> None:
    path = _generated(tmp_path)
    links = Path(compact.links_path(str(path)))
    text = links.read_text()
    links.write_text(text + bad(json.loads(text.splitlines()[-1])) + "\n")
    _count_as_written(path)
    with pytest.raises(ResultsFileError, match=says):
        aggregate([("a", load(str(path), lazy=True))])
    assert gc.isenabled()  # the collector, paused for the fold, runs again


def test_rows_written_as_json_dumps_writes_them() -> None:
    doc = _classes_doc()
    odd = doc["results"][0]
    odd.update(src_host='n"0\\', dst_host="nöde", warnings=['a "quoted" warning'], share_of_limit=None)
    doc["results"][1].update(bandwidth_gbps=float("inf"), samples=[float("inf")])  # not a figure: left out
    rows = aggregate([("generated", doc)])
    rows[0].values.append(float("nan"))  # what a hand-made row may hold
    text = format_json(rows, 0.2, ["x.json: not valid JSON", 'y "z"'])
    lines = text.splitlines()
    assert lines[2 : 2 + len(rows)] == [
        json.dumps(row.to_dict()) + ("," if i < len(rows) - 1 else "") for i, row in enumerate(rows)
    ]
    found = outliers(rows, 0.2)
    reference = json.dumps(
        {
            "outliers": [
                {"link": r.link, "test": r.test, "size_bytes": r.size_bytes, "modes": r.modes, "off": off}
                for r, off in found
            ],
            "skipped": ["x.json: not valid JSON", 'y "z"'],
        },
        indent=1,
    )
    assert found and text.split("\n ],\n", 1)[1].startswith(reference[2:-2])
    nothing = format_json(rows[2:3], 0.2, [])
    assert '"outliers": [],\n "skipped": []' in nothing and json.loads(nothing)["outliers"] == []


def test_p_values_in_bulk_are_the_same_floats() -> None:
    rng = np.random.default_rng(7)
    pairs: list[tuple[list[float], list[float]]] = []
    for k in range(400):
        n1, n2 = [(5, 5), (3, 4), (6, 6), (1, 1), (2, 7)][k % 5]
        pool = [1.0, 2.0, 2.5, *rng.random(3).tolist()]  # ties, and values without
        pairs.append(([float(rng.choice(pool)) for _ in range(n1)], [float(rng.choice(pool)) for _ in range(n2)]))
    pairs[10][0][0], pairs[11][1][0], pairs[12] = float("nan"), float("inf"), ([], [1.0])
    bulk = stats.mann_whitney_many(pairs)
    one_by_one = [stats.mann_whitney_p(a, b) for a, b in pairs]
    assert all(x == y or (math.isnan(x) and math.isnan(y)) for x, y in zip(bulk, one_by_one, strict=True))


def test_compare_of_generated_runs_names_what_is_on_one_side(tmp_path: Path) -> None:
    base = aggregate([("a", load(str(_generated(tmp_path)), lazy=True))])
    changes, unmatched = compare(base, base[1:], 0.05)  # the first link gone
    assert len(changes) == len(base) - 1 and len(unmatched) == 1
    assert unmatched[0].startswith(f"only in BASE: {base[0].link} bw ")
    text = format_changes(changes, unmatched, 0.05)
    assert "0 regression(s)" in text and text.splitlines()[0].split() == [
        "test", "modes", "size", "link", "runs", "base", "new", "change", "p", "q", "verdict"
    ]  # fmt: skip


@needs_chromium
def test_the_cdfs_render_in_a_browser(tmp_path: Path) -> None:
    page = tmp_path / "classes.html"
    page.write_text(render(aggregate([("generated", _classes_doc())]), ["generated"], [], 0.2))
    dom = browse(page, tmp_path / "profile")
    sizes = dom.stdout.split('data-cdf-sizes="')[1].split('"')[0].split(",")
    # Three of the four classes are drawn: the class of two links is too small to have a distribution
    # (fewer than 6 links), and the page says so in one line instead.
    assert len(sizes) == 3 and all(s == "360x180" for s in sizes)


def test_streamed_reports_are_the_rendered_ones(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """JSON and CSV come out in pieces of ROWS_A_CHUNK rows (written as they come), joined the same
    text whatever the pieces; CSV is what csv.writer writes of each row's to_dict."""
    rows = aggregate([("a", load(str(_generated(tmp_path)), lazy=True))])
    whole = {name: formats.render(rows, name) for name in ("json", "csv")}
    monkeypatch.setattr(formats, "ROWS_A_CHUNK", 1000)
    for name in ("json", "csv"):
        pieces = list(formats.render_chunks(rows, name))
        assert len(pieces) >= len(rows) // 1000 and "".join(pieces) == whole[name]
    assert [r["link"] for r in json.loads(whole["json"])["rows"]] == [row.link for row in rows]
    parsed = list(csv.reader(io.StringIO(whole["csv"])))
    assert parsed[0] == list(formats.CSV_FIELDS) and len(parsed) == len(rows) + 1
    assert parsed[1][formats.CSV_FIELDS.index("median")] == str(rows[0].median)


def test_outliers_are_the_standings_beyond_the_fraction() -> None:
    rows = aggregate([("generated", _classes_doc())])  # bandwidths and latencies (above is worse)
    for fraction in (0.01, 0.05, 0.2):
        plain = [(row, off) for row, off, size in standings(rows) if size >= 3 and row.worse(off, fraction)]
        assert outliers(rows, fraction) == sorted(plain, key=lambda item: -abs(item[1]))
    assert any(row.test == "lat" for row, _ in outliers(rows, 0.01))


def test_the_json_verdict_streams_every_passed_link_last(tmp_path: Path) -> None:
    rows = aggregate([("a", load(str(_generated(tmp_path)), lazy=True))])
    found = attribute(rows)
    checked = Checked(judge(rows, parse_expect(["default"]), found=found), found)
    text = checked.json()
    assert json.loads(text) == json.loads(json.dumps(checked.to_dict()))  # nothing lost, float for float
    assert list(json.loads(text))[-1] == "passed_links" and list(json.loads(text))[:2] == ["passed", "judged"]
    passed = [line.rstrip(",") for line in text.split('"passed_links": [\n', 1)[1].splitlines()[:-2]]
    assert len(passed) == sum(j.passed for j in checked.verdict.judged) > 1000  # a line each
    assert [json.loads(line) for line in passed] == [j.to_dict() for j in checked.verdict.judged if j.passed]


@pytest.mark.parametrize("command", ["report", "compare", "check"])
def test_a_links_file_that_is_not_utf8_or_not_records_is_bad_input(tmp_path: Path, command: str) -> None:
    """A links file with bytes that are not UTF-8, or a line that is no link record: one line naming
    the file and exit 2, as bad input (check's and compare's 1 says a link failed or a regression)."""
    path = _generated(tmp_path, ranks=4)
    links = Path(compact.links_path(str(path)))
    lines = links.read_bytes().splitlines(keepends=True)
    for bad in (b"\xff\xfe\n", json.dumps(dict(json.loads(lines[0]), samples=[-1.0, -2.0])).encode() + b"\n"):
        links.write_bytes(bad + b"".join(lines[1:]))
        args = {"report": [str(path)], "compare": [str(path), str(path)], "check": ["--expect", "default", str(path)]}
        proc = run_cli_here([command, *args[command]])
        assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
        assert "not UTF-8" in proc.stderr or "not a link record" in proc.stderr, proc.stderr
