"""Reports and comparisons over results files made by real runs (three CPU ranks, all pairs)."""

from __future__ import annotations

import copy
import csv
import io
import json
import shutil
import statistics
import subprocess
from pathlib import Path
from typing import Any

import pytest

from rdmabench.results.files import document
from rdmabench.results.files.document import load as load_results
from rdmabench.results.files.rows import aggregate
from rdmabench.results.reports.formats import render
from rdmabench.stats import mann_whitney_p

from .conftest import RESULTS_DATA, browse, needs_chromium, run_cli, run_cli_here

SIZES = "4KiB,64KiB"


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two real all-pairs runs over three ranks, in one directory."""
    directory = tmp_path_factory.mktemp("runs")
    for name in ("first.json", "second.json"):
        # Six samples per link: enough for the significance test of `compare` to tell a change from noise.
        command = ["run", "--np", "3", "--pattern", "all-pairs", "--sizes", SIZES, "-o", str(directory / name)]
        proc = run_cli([*command, "--samples", "6", "--sample-time", "0.005"], timeout=300)
        assert proc.returncode == 0, proc.stderr
    return directory


def _docs(directory: Path) -> list[dict[str, Any]]:
    return [load_results(str(directory / name)) for name in ("first.json", "second.json")]


def _as_schema_1(doc: dict[str, Any]) -> dict[str, Any]:
    """A loaded document written back as one schema-1 file (what rdmabench wrote before schema 2)."""
    old = {key: value for key, value in doc.items() if key not in ("links", "profiles", "ranks")}
    old["schema"] = {"name": "rdmabench-results", "version": 1}
    return old


def _report(*args: str) -> subprocess.CompletedProcess[str]:
    return run_cli_here(["report", *args])


def test_aggregates_match_the_inputs(runs: Path) -> None:
    proc = _report(str(runs), "--format", "json")
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)["rows"]
    assert len(rows) == 6 * 2  # six ordered pairs of three ranks, two sizes
    figures: dict[tuple[int, int, int], list[float]] = {}
    for doc in _docs(runs):
        for entry in doc["results"]:
            figures.setdefault((entry["src_rank"], entry["dst_rank"], entry["size_bytes"]), []).append(
                entry["bandwidth_gbps"]
            )
    costs: dict[tuple[int, int, int], list[dict[str, float]]] = {}
    for doc in _docs(runs):
        for entry in doc["results"]:
            costs.setdefault((entry["src_rank"], entry["dst_rank"], entry["size_bytes"]), []).append(
                entry["cpu_s_per_gb"]
            )
    for row in rows:
        src, dst = (int(end.split("rank")[1]) for end in row["link"].split(" -> "))
        values = figures[(src, dst, row["size_bytes"])]
        spent = costs[(src, dst, row["size_bytes"])]
        for end in ("src", "dst"):  # the CPU cost of each end: the mean of the runs'
            assert row["cpu_s_per_gb"][end] == pytest.approx(statistics.mean(c[end] for c in spent), rel=1e-4)
        assert row["wire"] is None  # shared memory between ranks of one host: no counter to check
        assert row["runs"] == 2
        assert row["median"] == pytest.approx(statistics.median(values))
        assert (row["min"], row["max"]) == (pytest.approx(min(values)), pytest.approx(max(values)))
        assert row["link_class"] == "intra-node" and row["transports"]


def test_formats_filters_and_grouping(runs: Path) -> None:
    table = _report(str(runs), "--by", "size")
    assert table.returncode == 0 and "== size: 4KiB" in table.stdout and "outlier" in table.stdout
    markdown = _report(str(runs), "--format", "markdown", "--wide")
    assert "| test | modes | size |" in markdown.stdout and "| CPU s/GB | wire |" in markdown.stdout
    narrow = _report(str(runs), "--format", "markdown").stdout  # by default: within 120 columns
    shown = narrow.splitlines()
    start = next(n for n, line in enumerate(shown) if line.startswith("| size |"))  # the rows' table
    table = shown[start : shown.index("", start)]
    assert len(table) == 2 + 12 and max(map(len, table)) <= 120
    rows = list(csv.DictReader(io.StringIO(_report(str(runs), "--format", "csv").stdout)))
    assert len(rows) == 12 and {r["size_bytes"] for r in rows} == {"4096", "65536"}
    assert all(float(r["cpu_src_s_per_gb"]) > 0 and float(r["cpu_dst_s_per_gb"]) > 0 for r in rows)
    assert all(r["wire_ratio"] == "" for r in rows)
    filtered = json.loads(_report(str(runs), "--format", "json", "--size", "4KiB").stdout)["rows"]
    assert len(filtered) == 6
    nothing = _report(str(runs), "--mode", "device")
    assert nothing.returncode == 2 and "no results match" in nothing.stderr


def test_bad_files_are_named_and_the_rest_reported(runs: Path, tmp_path: Path) -> None:
    shutil.copy(runs / "first.json", tmp_path / "good.json")  # schema 2: the summary and its links file
    shutil.copy(runs / "first.links.jsonl", tmp_path / "first.links.jsonl")
    shutil.copy(runs / "second.json", tmp_path / "orphan.json")  # a summary without its links file
    (tmp_path / "truncated.json").write_text((runs / "second.json").read_text()[:500])
    newer = json.loads((runs / "second.json").read_text())
    newer["schema"]["version"] = 99
    (tmp_path / "newer.json").write_text(json.dumps(newer))
    (tmp_path / "foreign.json").write_text('{"osu": "bw"}')
    proc = _report(str(tmp_path), "--format", "json")
    assert proc.returncode == 0
    assert "Traceback" not in proc.stderr
    for name, why in (
        ("truncated.json", "not valid JSON"),
        ("newer.json", "newer than this rdmabench"),
        ("foreign.json", "no schema"),
        ("orphan.json", "cannot read its links file second.links.jsonl"),
    ):
        assert any(name in line and why in line for line in proc.stderr.splitlines()), proc.stderr
    assert all(r["runs"] == 1 for r in json.loads(proc.stdout)["rows"])
    empty = tmp_path / "empty"
    empty.mkdir()
    none = _report(str(empty))
    assert none.returncode == 2 and "no results files" in none.stderr and "no usable results files" in none.stderr


def test_reports_never_overwrite_without_force(runs: Path, tmp_path: Path) -> None:
    out = tmp_path / "report.md"
    out.write_text("keep me")
    proc = _report(str(runs), "--format", "markdown", "-o", str(out))
    assert proc.returncode != 0 and "already exists" in proc.stderr and out.read_text() == "keep me"
    assert _report(str(runs), "--format", "markdown", "-o", str(out), "--force").returncode == 0
    assert out.read_text().startswith("# rdmabench report")


def test_compare_of_single_runs_shows_the_change_untested(runs: Path, tmp_path: Path) -> None:
    """One run a side: the change is shown, never called significant (one run's samples are not
    independent; tests/test_compare.py compares sets of runs). No pair tested: no verdict, exit 2."""
    same = run_cli_here(["compare", str(runs / "first.json"), str(runs / "first.json")])
    assert same.returncode == 2 and "0 regression(s)" in same.stdout and "no verdict" in same.stderr
    slower = _as_schema_1(copy.deepcopy(load_results(str(runs / "first.json"))))  # a schema-1 file against a 2
    victim = slower["results"][0]
    floor = min(victim["samples"]) * 0.5
    victim["samples"] = [floor * (1 - 0.01 * k) for k in range(len(victim["samples"]))]
    victim["bandwidth_gbps"] = statistics.median(victim["samples"])
    (tmp_path / "slower.json").write_text(json.dumps(slower))
    proc = run_cli_here(["compare", str(runs / "first.json"), str(tmp_path / "slower.json"), "--format", "json"])
    assert proc.returncode == 2
    changes = json.loads(proc.stdout)["changes"]
    assert not any(c["regression"] or c["tested"] for c in changes)
    assert min(c["change"] for c in changes) < -0.5


def test_mann_whitney() -> None:
    assert mann_whitney_p([1, 2, 3, 4, 5], [6, 7, 8, 9, 10]) < 0.05
    assert mann_whitney_p([1, 2, 3, 4, 5], [1, 2, 3, 4, 5]) > 0.5
    assert mann_whitney_p([], [1.0]) == 1.0


@needs_chromium
def test_html_report_renders_in_a_browser(runs: Path, tmp_path: Path) -> None:
    page = tmp_path / "report.html"
    proc = _report(str(runs), "--format", "html", "-o", str(page))
    assert proc.returncode == 0, proc.stderr
    dom = browse(page, tmp_path / "profile1")
    sizes = dom.stdout.split('data-image-sizes="')[1].split('"')[0].split(",")
    assert len(sizes) >= 3  # heatmaps and curves
    for size in sizes:
        width, height = (int(v) for v in size.split("x"))
        assert width > 100 and height > 100
    assert "<table>" in dom.stdout and "rank0 -&gt; " in dom.stdout.replace("vm:", "")
    cdfs = dom.stdout.split('data-cdf-sizes="')[1].split('"')[0].split(",")
    assert cdfs == ["360x180", "360x180"]  # a CDF per link class: here one per size
    shot = tmp_path / "report.png"
    browse(page, tmp_path / "profile2", f"--screenshot={shot}", "--window-size=1200,2000")
    assert shot.exists() and shot.stat().st_size > 20_000


def test_staged_pipelines_of_different_shapes_are_different_rows() -> None:
    from rdmabench.results.files.rows import aggregate

    def entry(chunk: int, buffers: int, value: float) -> dict[str, Any]:
        return {
            "test": "bw", "src_rank": 0, "dst_rank": 1, "src_mode": "staged", "dst_mode": "device",
            "size_bytes": 1 << 28, "bandwidth_gbps": value, "samples": [value], "unit": "GB/s",
            "src_host": "n1", "dst_host": "n1", "src_gpu": 0, "dst_gpu": 1,
            "staging": {"chunk_bytes": chunk, "src_buffers": buffers, "dst_buffers": None},
        }  # fmt: skip

    docs = [("a", {"metadata": {}, "results": [entry(4 << 20, 2, 10.0), entry(1 << 20, 1, 5.0)]})]
    rows = aggregate(docs)
    assert sorted(r.modes for r in rows) == ["staged(1MiB x1)->device", "staged(4MiB x2)->device"]
    assert all(r.values == [v] for r, v in zip(sorted(rows, key=lambda r: r.modes), (5.0, 10.0), strict=True))


def test_runs_with_different_settings_are_never_merged(tmp_path: Path) -> None:
    """A validated and a --no-validate run of the same link are two rows, each naming what differs."""
    for name, extra in (("checked.json", []), ("unchecked.json", ["--no-validate"])):
        proc = run_cli(
            ["run", "--sizes", "64KiB", "-o", str(tmp_path / name), "--samples", "3", "--sample-time", "0.005", *extra]
        )
        assert proc.returncode == 0, proc.stderr
    proc = _report(str(tmp_path), "--format", "json")
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)["rows"]
    assert len(rows) == 2 and all(r["runs"] == 1 for r in rows)
    assert sorted(r["settings"]["validated"] for r in rows) == ["no", "yes"]
    table = _report(str(tmp_path)).stdout
    assert "validated=no" in table and "validated=yes" in table
    verdict = run_cli_here(["compare", str(tmp_path / "checked.json"), str(tmp_path / "unchecked.json")])
    assert verdict.returncode == 2 and "no link and size in common" in verdict.stderr
    from rdmabench.results.files.document import load
    from rdmabench.results.files.rows import aggregate
    from rdmabench.results.verdicts.compare import compare

    base = aggregate([("c", load(str(tmp_path / "checked.json")))])
    new = aggregate([("u", load(str(tmp_path / "unchecked.json")))])
    changes, unmatched = compare(base, new, 0.05)
    assert changes == [] and any("validated yes vs no" in line or "validated no vs yes" in line for line in unmatched)


def test_a_one_buffer_run_is_never_merged_with_a_buffer_per_message() -> None:
    from rdmabench.results.files.rows import aggregate

    def entry(value: float, one_buffer: bool) -> dict[str, Any]:
        return {
            "test": "bw", "src_rank": 0, "dst_rank": 1, "src_mode": "pageable", "dst_mode": "pageable",
            "size_bytes": 1 << 20, "bandwidth_gbps": value, "samples": [value], "unit": "GB/s", "window": 8,
            "src_host": "n1", "dst_host": "n1", "engine": "native", "validated": False,
        } | ({"one_buffer": True} if one_buffer else {})  # fmt: skip

    rows = aggregate([("a", {"metadata": {}, "results": [entry(10.0, False), entry(15.0, True)]})])
    assert len(rows) == 2 and sorted(r.values[0] for r in rows) == [10.0, 15.0]
    assert sorted(dict(r.settings).get("buffers", "-") for r in rows) == ["-", "one"]


def test_the_report_gives_a_block_lists_p99_and_nothing_for_other_rows() -> None:
    """A real H200 run's block lists (schema 2): p99 and p99.9 columns in every format; '-' for messages."""
    blocks = document.load(str(RESULTS_DATA / "blocks-put-device.json"), lazy=True)
    plain = document.load(str(RESULTS_DATA / "allpairs-bw-device.json"), lazy=True)
    rows = aggregate([("blocks", blocks), ("plain", plain)])
    kept = [row for row in rows if row.tail_us is not None]
    assert kept and all(row.test == "put" for row in kept)
    first = min(kept, key=lambda row: row.size_bytes)
    table = render(rows, "table").splitlines()
    header = next(line for line in table if line.startswith("test "))
    assert "p99 us" in header and "p99.9 us" in header
    assert any(f"{first.tail_us[0]:.1f}" in line and f"{first.tail_us[1]:.1f}" in line for line in table)  # type: ignore[index]
    assert any(line.startswith("bw ") and " - " in line for line in table)
    markdown = render(rows, "markdown")
    assert "| p99 us | p99.9 us |" in markdown
    csv_lines = render(rows, "csv").splitlines()
    assert "transfer_p99_us,transfer_p999_us" in csv_lines[0]
    parsed = json.loads(render(rows, "json"))["rows"]
    assert {row["transfer_p99_us"] is None for row in parsed} == {True, False}
