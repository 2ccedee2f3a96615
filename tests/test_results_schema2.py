"""Schema 2 (results that hold a cluster): a small summary beside one short JSON line per link, on
real runs; real schema-1 files (tests/data/results/) still read the same; and a GENERATED cluster result
(marked so in its metadata) through the loader and every report format."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from rdmabench.results.files import compact
from rdmabench.results.files.document import load as load_results

from .conftest import RESULTS_DATA, browse, million_sources, needs_chromium, run_cli, run_cli_here

SCHEMA_1 = RESULTS_DATA / "allpairs-bw-device.json"


def test_a_run_writes_a_summary_and_one_short_line_per_link(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    args = ["run", "--np", "3", "--pattern", "all-pairs", "--sizes", "4KiB,64KiB", "--samples", "3"]
    proc = run_cli([*args, "--sample-time", "0.005", "-o", str(out)], timeout=300)
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(out.read_text())
    links = tmp_path / "r.links.jsonl"
    assert summary["schema"] == {"name": "rdmabench-results", "version": 2}
    assert summary["links"]["file"] == links.name and summary["links"]["count"] == 12
    lines = links.read_text().splitlines()
    assert len(lines) == 12 and len(links.read_bytes()) / 12 <= 200  # the budget per link
    records = [json.loads(line) for line in lines]  # flat objects: one line of pandas/polars each
    assert all({"src", "dst", "size", "value", "samples", "profile"} <= r.keys() for r in records)
    assert len(summary["profiles"]) <= 4 and [r["rank"] for r in summary["ranks"]] == [0, 1, 2]
    doc = load_results(str(out))  # the loader joins them back into full entries
    assert len(doc["results"]) == 12 and doc["matrices"]
    for entry, record in zip(doc["results"], records, strict=True):
        assert entry["bandwidth_gbps"] == entry["stats"]["median"] and entry["src_host"] and entry["transport"]
        assert math.isclose(entry["bandwidth_gbps"], record["value"], rel_tol=1e-5)  # the record's, rounded
        assert entry["stats"]["min"] == min(record["samples"])
        assert entry["messages_per_sample"] == record["iterations"] * entry["window"] * entry["passes"]


def test_schema_1_entries_survive_the_round_trip() -> None:
    """Every field of real schema-1 entries comes back; floats to 6 significant digits."""
    entries = load_results(str(SCHEMA_1))["results"]
    compactor, records = compact.Compactor(), []
    for entry in entries:
        records.extend(line for line in compactor.lines(entry, "bandwidth_gbps") if "src" in line)
    assert len(compactor.tables.profiles) < len(entries)  # shared facts stored once
    for entry, record in zip(entries, records, strict=True):
        back = compact.expand(record, compactor.tables)
        assert back.keys() == entry.keys()
        for key, value in entry.items():
            if isinstance(value, float):
                assert math.isclose(back[key], value, rel_tol=1e-5), key
            elif key == "stats":
                scale = abs(value["median"]) * 1e-5  # the spread of 6-digit samples, not of their figure
                assert all(math.isclose(back[key][k], v, rel_tol=1e-5, abs_tol=scale) for k, v in value.items())
            elif key in ("samples", "aggregate_samples"):
                assert all(math.isclose(a, b, rel_tol=1e-5) for a, b in zip(back[key], value, strict=True))
            else:
                assert back[key] == value, key


def test_a_links_file_given_for_its_summary_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "x.links.jsonl").write_text('{"src": 0}\n')
    proc = run_cli_here(["report", str(tmp_path / "x.links.jsonl")])
    assert proc.returncode == 2 and "the links file of a schema-2 result; give its summary" in proc.stderr


def test_a_bad_link_record_names_its_line(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    proc = run_cli(["run", "--sizes", "4KiB", "--samples", "2", "--sample-time", "0.005", "-o", str(out)])
    assert proc.returncode == 0, proc.stderr
    links = tmp_path / "r.links.jsonl"
    links.write_text(links.read_text() + '{"src": 0, "dst": 1, "profile": 7}\n')
    summary = json.loads(out.read_text())
    summary["links"]["count"] += 1  # as many records as the summary says: the bad one is read, and named
    out.write_text(json.dumps(summary))
    bad = run_cli_here(["report", str(out)])
    assert bad.returncode == 2 and "r.links.jsonl: line 2 is not a link record" in bad.stderr  # bad input


@pytest.mark.parametrize("name", ["table", "markdown", "json", "csv", "html"])
def test_a_generated_cluster_result_reports_in_every_format(
    name: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    from devtools.million import generate

    directory = tmp_path_factory.getbasetemp() / "generated"
    path = directory / "generated-64.json"
    if not path.exists():
        directory.mkdir(exist_ok=True)
        assert generate(str(path), 64, 8, million_sources()) == 64 * 63
    summary = json.loads(path.read_text())
    assert summary["metadata"]["generated"].startswith("SYNTHETIC")
    out = directory / f"report.{name}"
    proc = run_cli_here(["report", str(path), "--format", name, "-o", str(out), "--force"], timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert out.stat().st_size > 0


@needs_chromium
def test_a_cluster_page_stays_small_and_renders(tmp_path: Path) -> None:
    """72 generated ranks on 9 hosts (5,112 links): past the ends a map draws one by one and the links
    a page lists, so maps per pair of hosts and the worst links listed (256 ranks, 65,280 links: 12.5 s
    of CPU on the 2-core machine for what these show; 72: 5.4 s, mostly the browser)."""
    from devtools.million import generate
    from rdmabench.results.reports import html

    ranks = 72
    assert ranks > html.PER_END_UP_TO and ranks * (ranks - 1) > html.ALL_LINKS_UP_TO
    path = tmp_path / "generated-72.json"
    generate(str(path), ranks, 8, million_sources())
    page = tmp_path / "cluster.html"
    proc = run_cli_here(["report", str(path), "--format", "html", "-o", str(page)], timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert page.stat().st_size < 10 << 20
    text = page.read_text()
    assert "per pair of hosts" in text and "The 2000 worst of 5112 links" in text
    assert text.count('<svg class="cdf"') == 2  # a CDF per link class: NVLink within hosts, pageable between
    dom = browse(page, tmp_path / "profile")
    sizes = dom.stdout.split('data-image-sizes="')[1].split('"')[0].split(",")
    assert sizes and all(int(s.split("x")[0]) > 100 and int(s.split("x")[1]) > 100 for s in sizes)
