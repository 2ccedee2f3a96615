"""Names from files and hosts reach every output safely: a real run's results file, its host names
(and a transport, a warning and a limit's kind) replaced by hostile ones, read back by every report
format, the HTML page, the verdict's text and JUnit XML; the live table and the CLI's one-line
messages given the same names. Each output stays well formed and shows each name as text."""

from __future__ import annotations

import copy
import csv
import io
import json
import re
import uuid
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from rdmabench import escape
from rdmabench.measure import registry
from rdmabench.measure.entryrecord import Ends, Entry, Limit, Steps, UcxPath
from rdmabench.results.files.document import load
from rdmabench.results.files.rows import Row, aggregate
from rdmabench.results.reports import html
from rdmabench.results.reports.cells import COLUMNS
from rdmabench.results.reports.formats import format_csv, format_json, format_markdown, format_table
from rdmabench.results.reports.table import ProgressTable
from rdmabench.results.verdicts.verdict import format_verdict, judge, junit_xml

from .conftest import QUICK, run_cli, run_cli_here

# Each pair names the two hosts of one results file.
HOSTILE = [
    ("evil|x\n| 9 | 9 |", "<script>alert(1)</script>"),
    ("=cmd|' /C calc'!A0", "$\\frac{1}{0}$"),
    ("\x1b[31mred", "\x00\x07$\\notacommand$"),
    ("@SUM(1+1)*cmd|' /C calc'!A0", "-2+3\t\r\u202etxt.exe"),
]
LIMIT_GBPS = 1000.0  # every link far below it: each fails a floor
RAW = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")  # what no output may carry raw


@pytest.fixture(scope="module")
def real_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real all-pairs run of two ranks at two sizes (two links: a heatmap and a curve each)."""
    path = tmp_path_factory.mktemp("run") / "r.json"
    command = ["run", "--np", "2", "--pattern", "all-pairs", "--sizes", "4KiB,64KiB", *QUICK, "-o", str(path)]
    proc = run_cli(command, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return path


def _hostile_copy(run: Path, folder: Path, hosts: tuple[str, str]) -> Path:
    """The run's summary with its ranks on `hosts`, every profile's transport, warnings and limit
    (of a hostile kind: each link at a share of it) made hostile too; its links file beside it."""
    folder.mkdir(parents=True, exist_ok=True)
    summary = json.loads(run.read_text())
    links = [json.loads(line) for line in (run.parent / summary["links"]["file"]).read_text().splitlines()]
    lines = [json.dumps(dict(link, share=link["value"] / LIMIT_GBPS)) for link in links]
    (folder / summary["links"]["file"]).write_text("\n".join(lines) + "\n")
    for rank, host in zip(summary["ranks"], hosts, strict=True):
        rank["host"] = host
    summary["metadata"]["hosts"] = list(hosts)
    summary["metadata"]["run_id"] = str(
        uuid.uuid4()
    )  # each copy stands for a run of its own (compare counts a run once)
    for profile in summary["profiles"]:
        profile["transport"] = "\x1b[2J" + hosts[0]
        profile["warnings"] = [f"slow on {hosts[1]}", "<b>w</b>|\n| 1 |"]
        profile["link_limit"] = {"gbps": LIMIT_GBPS, "kind": hosts[1], "detail": hosts[0], "measured": True}
    path = folder / "hostile.json"
    path.write_text(json.dumps(summary))
    return path


def _rows(path: Path) -> list[Row]:
    return aggregate([(str(path), load(str(path), lazy=True))])


def _markdown_cells(line: str) -> list[str]:
    """A Markdown table line's cells, split at its unescaped pipes (a backslash escapes the next character)."""
    cells, cell, chars = [], "", iter(line.strip()[1:-1])
    for char in chars:
        if char == "\\":
            cell += char + next(chars, "")
        elif char == "|":
            cells.append(cell)
            cell = ""
        else:
            cell += char
    return [*cells, cell]


@pytest.mark.parametrize("hosts", HOSTILE, ids=range(len(HOSTILE)))
def test_markdown_keeps_its_tables(real_run: Path, tmp_path: Path, hosts: tuple[str, str]) -> None:
    rows = _rows(_hostile_copy(real_run, tmp_path, hosts))
    for by in ("none", "host"):
        narrow = format_markdown(rows, by, 0.2)  # the default: within 120 columns, names escaped all the same
        assert not RAW.search(narrow) and "<script>" not in narrow and "<b>" not in narrow
        text = format_markdown(rows, by, 0.2, wide=True)  # every column
        assert not RAW.search(text) and "<script>" not in text and "<b>" not in text
        lines = text.split("\n")
        tables = [i for i, line in enumerate(lines) if line.startswith("| test |")]
        assert tables and all(not line.startswith("| 9 |") and not line.startswith("| 1 |") for line in lines)
        widths = {len(_markdown_cells(line)) for line in lines if line.startswith("|") and "---" not in line}
        # the rows' tables (a run this small has no class to judge, so no distribution's table of 11)
        assert len(COLUMNS) in widths and widths <= {len(COLUMNS), 11}
        assert sum(1 for line in lines if line.startswith("| bw |")) == len(rows)
    assert escape.markdown(hosts[0]) in format_markdown(rows, "host", 0.2)


@pytest.mark.parametrize("hosts", HOSTILE, ids=range(len(HOSTILE)))
def test_csv_parses_and_no_cell_is_a_formula(real_run: Path, tmp_path: Path, hosts: tuple[str, str]) -> None:
    rows = _rows(_hostile_copy(real_run, tmp_path, hosts))
    text = format_csv(rows)
    assert not RAW.search(text.replace("\r\n", ""))
    table = list(csv.reader(io.StringIO(text)))
    assert len(table) == 1 + len(rows) and {len(line) for line in table} == {len(table[0])}
    for line in table[1:]:
        for cell in line:
            try:
                float(cell)
            except ValueError:
                assert not cell.startswith(escape.FORMULA_START), cell
    links = {line[table[0].index("link")] for line in table[1:]}
    assert links == {escape.csv_cell(row.link) for row in rows}


@pytest.mark.parametrize("hosts", HOSTILE, ids=range(len(HOSTILE)))
def test_terminal_text_shows_control_characters(real_run: Path, tmp_path: Path, hosts: tuple[str, str]) -> None:
    rows = _rows(_hostile_copy(real_run, tmp_path, hosts))
    for by in ("none", "host"):
        text = format_table(rows, by, 0.2)
        assert not RAW.search(text)
        assert all(not line.startswith("| 9 |") and not line.startswith("| 1 |") for line in text.split("\n"))
    verdict = judge(rows, {"all": 0.99})
    text = format_verdict(verdict)
    assert not RAW.search(text) and text.count("\nFAIL ") == len(rows) // 2  # the largest size of each link
    assert escape.visible(rows[0].src_host) in format_table(rows, "host", 0.2)
    assert json.loads(format_json(rows, 0.2, []))["rows"][0]["link"] == rows[0].link  # JSON keeps names


@pytest.mark.parametrize("hosts", HOSTILE, ids=range(len(HOSTILE)))
def test_junit_parses_with_every_case(real_run: Path, tmp_path: Path, hosts: tuple[str, str]) -> None:
    rows = _rows(_hostile_copy(real_run, tmp_path, hosts))
    verdict = judge(rows, {"all": 0.99})
    suite = ET.fromstring(junit_xml(verdict).encode())
    cases = list(suite)
    assert len(cases) == len(verdict.judged) == 2 and all(case.find("failure") is not None for case in cases)
    names = {(case.get("name") or "").split(" 64KiB ")[0] for case in cases}
    assert names == {escape.visible(judgement.row.link) for judgement in verdict.judged}
    messages = [case.find("failure").get("message") or "" for case in cases]  # type: ignore[union-attr]
    assert all(escape.visible(hosts[1]) in message for message in messages)  # the limit's kind, as text


@pytest.mark.parametrize("hosts", HOSTILE, ids=range(len(HOSTILE)))
def test_html_renders_and_escapes(real_run: Path, tmp_path: Path, hosts: tuple[str, str]) -> None:
    path = _hostile_copy(real_run, tmp_path, hosts)
    page = html.render(_rows(path), [str(path)], [f"{hosts[0]}: a problem"], 0.2)
    assert not RAW.search(page.replace("\n", ""))
    assert "<script>alert" not in page and "<b>w</b>" not in page
    assert escape.html(hosts[0]) in page and escape.html(hosts[1]) in page


def test_the_cli_end_to_end(real_run: Path, tmp_path: Path) -> None:
    """report (table, html) and check (text, JUnit) over every hostile file at once, as a user runs them."""
    paths = [str(_hostile_copy(real_run, tmp_path / str(i), hosts)) for i, hosts in enumerate(HOSTILE)]
    page = tmp_path / "page.html"
    proc = run_cli(["report", *paths, "--format", "html", "-o", str(page)])
    assert proc.returncode == 0 and "<script>alert" not in page.read_text(), proc.stderr
    proc = run_cli(["report", *paths, "--by", "host"])
    assert proc.returncode == 0 and not RAW.search(proc.stdout), proc.stderr
    junit = tmp_path / "check.xml"
    proc = run_cli(["check", *paths, "--expect", "all=0.99", "--junit", str(junit)])
    assert proc.returncode == 1 and not RAW.search(proc.stdout + proc.stderr), proc.stderr
    assert len(ET.parse(junit).getroot().findall("testcase")) == 2 * len(HOSTILE)


def test_one_line_messages_stay_one_line(tmp_path: Path) -> None:
    """A path with an escape sequence and a newline in it: the warning and the error are one line each."""
    missing = tmp_path / "x\x1b[31m\nrdmabench: error: fake.json"
    proc = run_cli_here(["report", str(missing)])
    lines = proc.stderr.splitlines()
    assert proc.returncode == 2 and len(lines) == 2 and not RAW.search(proc.stderr), proc.stderr
    assert lines[0].startswith("rdmabench: warning: skipped") and "x\\x1b[31m\\nrdmabench" in lines[0]


def _entry(transport: str, protocol: str, warnings: list[str], link_limit: dict[str, Any]) -> Entry:
    return Entry(
        test="bw", src_rank=0, dst_rank=1, src_mode="pinned", dst_mode="pinned", size_bytes=4096,
        figure_field="bandwidth_gbps", value=9.0, unit="GB/s", scope="unidirectional",
        stats={"median": 9.0, "min": 8.0, "max": 10.0, "p95": 10.0}, samples=[9.0],
        steps=Steps(4, 10, 2, 40, "native", True), validated=True, wrong_bytes=0, staging=None,
        path=UcxPath(transport, protocol), ends=Ends(link="same host"), warnings=warnings,
        limit=Limit(link_limit, 0.5),
    )  # fmt: skip


def test_the_live_table_shows_control_characters() -> None:
    out = io.StringIO()
    table = ProgressTable(registry.get("bw"), out)
    limit = {"gbps": 18.0, "kind": "\x1b]0;title\x07", "detail": "x", "measured": True}
    hostile = _entry(transport="\x1b[2Jcma", protocol="\x9b31m", warnings=["on evil\n#   fake row"], link_limit=limit)
    table.row([hostile])
    table.link_rows([copy.copy(hostile)], 1, 1, float("nan"))
    table.note("placement on \x1b[31mred\u202e")
    text = out.getvalue()
    assert not RAW.search(text) and "\\x1b[2Jcma" in text and "\\x9b31m" in text
    assert "fake row" in text and "\n#   fake row" not in text
