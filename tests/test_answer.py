"""The answer to "which posting path for my block size, at what cost to my model", from results files
GENERATED here (marked so in their metadata): several paths and carve-outs at three block sizes, each
read back through the report's rows; the answer's choices and three costs, its picture in the HTML
page, how `compare` shows it changed, and --model-budget's parsing. And one real run on the CPU."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from rdmabench.errors import ConfigError
from rdmabench.results.files import document
from rdmabench.results.files.entries import posting_of
from rdmabench.results.files.rows import Row, aggregate
from rdmabench.results.reports import html
from rdmabench.results.reports.answer import BUDGET, answers, lines, parse_budget
from rdmabench.results.reports.formats import format_markdown

from .conftest import QUICK, run_cli, run_cli_here

GENERATED = "tests: answer-report (generated figures, not a measurement)"
KIB = 1024
HOSTILE = "h<b>x</b>$y$"  # a host name from a file: escaped in the page and in every plot label


def _entry(
    size: int,
    posted: str,
    gbps: float,
    beside: tuple[float, float, float] | None,  # alone GB/s, slowdown, half its range
    sms: tuple[str, int] | None = None,
    carveout: int | None = None,
    cpu_us: float | None = None,
    host: str = "h",
    model: str = "gemm:8192",
) -> dict[str, Any]:
    """One generated block-list entry: 1,024 random blocks of `size`, GPU 0 -> GPU 1 of `host`, beside
    `model` (its name as `--beside` records it: with its carve-out, or without)."""
    blocks: dict[str, Any] = {
        "count": 1024, "layout": "random", "batch": 1, "block_bytes": size, "posted_by": posted,
        "sms": {"mode": sms[0], "transfer": sms[1]} if sms else {"mode": "whole GPU"},
        "ceiling_gbps": 370.0, "contiguous_gbps": 395.0,
    }  # fmt: skip
    if cpu_us is not None:
        blocks["cpu_us_per_descriptor"] = cpu_us
    entry: dict[str, Any] = {
        "test": "put", "src_rank": 0, "dst_rank": 1, "src_mode": "device", "dst_mode": "device", "unit": "GB/s",
        "size_bytes": size, "bandwidth_gbps": gbps, "samples": [gbps * 0.9, gbps, gbps * 1.05], "iterations": 4,
        "validated": True,
        "engine": "native", "window": 1024, "transport": "cuda_ipc/cuda", "src_host": host, "dst_host": host, "src_gpu": 0, "dst_gpu": 1,
        "blocks": blocks,
    }  # fmt: skip
    if beside is not None:
        alone, slowdown, half = beside
        entry["beside"] = {
            "load": model, "unit": "TFLOP/s", "transfer_alone": alone, "slowdown": slowdown,
            "slowdown_range": [slowdown - half, slowdown + half], "pairs": 5,
        }  # fmt: skip
        if carveout is not None:
            entry["beside"]["carveout"] = carveout
    return entry


def _reference(size: int, host: str = "h") -> dict[str, Any]:
    """The list's contiguous reference: its bytes as one message, alone."""
    entry = _entry(size, "ce-batch", 395.0, None, host=host)
    entry["blocks"] |= {"count": 1, "layout": "contiguous"}
    entry["size_bytes"] = 1024 * size
    return entry


def _candidates(armed: bool = True, host: str = "h") -> list[dict[str, Any]]:
    """Paths x carve-outs x block sizes. At 4 KiB the GPU's kernel wins idle and costs the model 30%;
    within 5% the copy engines armed ahead win (or, without them, the kernel on 8 SMs of a green context
    beside a model carved 8 SMs); the kernel on 8 SMs beside a model carved 16 is fast and over budget."""
    found = [
        _entry(4 * KIB, "gpu", 22.0, (178.0, 1.30, 0.05), host=host),
        _entry(4 * KIB, "ce-batch", 7.6, (7.9, 1.01, 0.01), cpu_us=1.02, host=host),
        _entry(4 * KIB, "gpu", 121.0, (150.0, 1.04, 0.01), sms=("green", 8), carveout=8, host=host),
        _entry(4 * KIB, "gpu", 235.0, (160.0, 1.09, 0.01), ("budget", 8), 16, host=host, model="gemm:8192,carveout=16"),
        _entry(64 * KIB, "gpu", 340.0, (380.0, 1.50, 0.02), host=host),
        _entry(64 * KIB, "ce-batch", 93.0, (95.0, 1.00, 0.01), cpu_us=1.01, host=host),
        _entry(64 * KIB, "gpu", 207.0, (300.0, 1.03, 0.01), sms=("green", 8), carveout=8, host=host),
        _entry(64 * KIB, "gpu", 150.0, (300.0, 1.12, 0.02), sms=("green", 8), carveout=0, host=host),
        _entry(1024 * KIB, "gpu", 265.0, (368.0, 2.98, 0.02), host=host),
        _entry(1024 * KIB, "ce-batch", 327.0, (330.0, 1.01, 0.01), cpu_us=0.9, host=host),
        *(_reference(size, host) for size in (4 * KIB, 64 * KIB, 1024 * KIB)),
    ]
    if armed:
        found += [
            _entry(4 * KIB, "ce-armed", 150.0, (170.0, 1.03, 0.01), cpu_us=0.8, host=host),
            _entry(64 * KIB, "ce-armed", 360.0, (365.0, 1.02, 0.01), cpu_us=0.8, host=host),
        ]
    return found


def _document(entries: list[dict[str, Any]]) -> dict[str, Any]:
    metadata = {
        "generated": GENERATED,
        "created_utc": "2026-11-27T10:00:00Z",
        "world_size": 2,
        "config": {"test": "put"},
    }
    return {"metadata": metadata, "results": entries}


def _rows(entries: list[dict[str, Any]]) -> list[Row]:
    return aggregate([("generated", _document(entries))])


def _write(path: Path, entries: list[dict[str, Any]]) -> Path:
    """A results file as a run writes it (its links file beside it), of generated entries."""
    stream = document.ResultsStream(str(path), _document(entries)["metadata"])
    stream.append(entries)
    stream.finish(complete=True)
    return path


def test_posting_of_reads_the_path_its_sms_and_green_context_from_the_entry() -> None:
    assert posting_of(_entry(4096, "gpu", 1.0, None, sms=("green", 8))) == ("gpu", 8, True)
    assert posting_of(_entry(4096, "gpu", 1.0, None, sms=("budget", 16))) == ("gpu", 16, False)
    assert posting_of(_entry(4096, "ce-armed", 1.0, None)) == ("ce-armed", None, False)
    older = _entry(4096, "cpu", 1.0, None)
    del older["blocks"]["posted_by"], older["blocks"]["sms"]
    assert posting_of(older) == ("cpu", None, False)  # before other paths existed: a request per block
    assert posting_of({"test": "bw"}) == (None, None, False)


def test_rows_carry_the_path_and_carve_out_as_fields_and_never_merge_them() -> None:
    rows = [row for row in _rows(_candidates()) if row.size_bytes == 64 * KIB]
    found = {(r.posting, r.posting_sms, r.posting_green, r.carveout, r.cpu_us_per_descriptor) for r in rows}
    assert found == {
        ("gpu", None, False, 0, None), ("ce-batch", None, False, 0, 1.01), ("gpu", 8, True, 8, None),
        ("gpu", 8, True, 0, None), ("ce-armed", None, False, 0, 0.8),
    }  # fmt: skip
    green = [r for r in rows if r.posting_green]
    assert len(green) == 2 and {r.carveout for r in green} == {0, 8}  # one path, two carve-outs: two rows
    assert all(r.block_list == "1024 x random, 1 in flight" for r in rows)
    loads = {(r.load, r.carveout, r.differs) for r in _rows(_candidates()) if r.size_bytes == 4 * KIB}
    assert ("beside gemm:8192", 16, "blocks=1024 x random, 1 in flight, posted by the GPU, 8 SMs, carveout=16") in loads
    assert {load for load, _carveout, _differs in loads} == {"beside gemm:8192"}  # the model, apart from its carve-out
    (carved,) = [r for r in green if r.carveout == 8]
    assert carved.slowdown_range == pytest.approx((1.02, 1.04)) and carved.gbps_range == pytest.approx((186.3, 217.35))
    assert carved.contiguous_gbps == 395.0 and carved.ceiling_gbps == 370.0
    (reference,) = [r for r in _rows(_candidates()) if r.size_bytes == 1024 * 64 * KIB]
    assert reference.posting == "ce-batch" and reference.block_list is None  # a reference is no candidate


def test_paths_and_carve_outs_of_one_profile_in_a_written_file_stay_apart(tmp_path: Path) -> None:
    """Written as a run writes it, the records of one profile differ only in their own `blocks` and
    `beside`: each path, SM budget and carve-out is still its own row (they were read as repeats of the
    profile's first record, and dropped)."""
    path = str(_write(tmp_path / "r.json", _candidates()))
    notes: list[str] = []
    rows = aggregate([(path, document.load(path, lazy=True))], notes=notes)
    assert not notes and len(rows) == len(_candidates())
    middle = [row for row in rows if row.size_bytes == 64 * KIB]
    assert sorted((row.posting, row.carveout) for row in middle if row.posting_green) == [("gpu", 0), ("gpu", 8)]
    (reference, *_others) = [row for row in rows if row.block_list is None]
    assert reference.load == "alone" and reference.beside is None


def test_the_answer_names_the_idle_winner_and_the_one_within_the_budget_with_their_costs() -> None:
    found = {answer.size_bytes: answer for answer in answers(_rows(_candidates()))}
    assert sorted(found) == [4 * KIB, 64 * KIB, 1024 * KIB]
    small = found[4 * KIB]
    assert small.idle is not None and (small.idle.label, small.idle.gbps, small.idle.slowdown) == ("gpu", 178.0, 1.30)
    assert small.idle.slowdown is not None and small.idle.slowdown > BUDGET  # wins idle, blows the budget
    assert small.within is not None and (small.within.label, small.within.gbps) == ("ce-armed", 150.0)
    assert (small.within.carveout, small.within.cpu_us, small.within.slowdown_range) == (0, 0.8, (1.02, 1.04))
    assert len(small.points) == 5 and small.contiguous_gbps == 395.0 and small.ceiling_gbps == 370.0
    middle = found[64 * KIB].within
    assert middle is not None and middle.label == "ce-armed" and middle.gbps == 360.0
    text = lines(list(found.values()))
    assert "idle: gpu 178.000 GB/s (model x1.300 [1.250-1.350], 0 SMs taken, CPU - us/descriptor)" in text[1]
    assert (
        "within 5%: ce-armed 150.000 GB/s (model x1.030 [1.020-1.040], 0 SMs taken, CPU 0.8 us/descriptor)" in text[1]
    )


def test_without_the_armed_path_a_carve_out_wins_within_the_budget_and_a_wider_budget_changes_it() -> None:
    rows = _rows(_candidates(armed=False))
    (small, *_rest) = answers(rows)
    assert small.within is not None and small.within.label == "gpu (8 SMs, green context), model carved 8 SMs"
    assert (small.within.carveout, small.within.cpu_us) == (8, None)  # its SMs taken; its CPU time not recorded
    (wide, *_rest) = answers(rows, parse_budget("10%"))
    assert wide.within is not None and wide.within.label == "gpu (8 SMs), model carved 16 SMs"
    (tight, *_rest) = answers(rows, parse_budget("0.005"))
    assert tight.within is None and "no path within the budget" in lines([tight], tight.budget)[1]


@pytest.mark.parametrize(("text", "budget"), [("5%", 1.05), ("0.05", 1.05), ("2.5%", 1.025), (" 10% ", 1.10)])
def test_a_model_budget_is_a_percentage_or_a_fraction_below_one(text: str, budget: float) -> None:
    assert parse_budget(text) == pytest.approx(budget)


@pytest.mark.parametrize("text", ["5", "1", "0", "0%", "-1%", "abc", "nan", "inf%", "2000%", "%"])
def test_a_bad_model_budget_is_refused(text: str) -> None:
    with pytest.raises(ConfigError, match="--model-budget"):
        parse_budget(text)


@pytest.mark.parametrize("command", ["report", "compare", "run"])
def test_a_bad_model_budget_is_one_line_and_exit_2(tmp_path: Path, command: str) -> None:
    path = str(_write(tmp_path / "r.json", _candidates()))
    given = {"report": [path], "compare": [path, path], "run": ["--blocks", "8", "-o", str(tmp_path / "x.json")]}
    proc = run_cli_here([command, *given[command], "--model-budget", "5"])
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "--model-budget '5' is ambiguous" in proc.stderr and not proc.stdout


@pytest.fixture
def figures(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Every figure the page draws, kept open instead of encoded."""
    drawn: list[Any] = []
    monkeypatch.setattr(html, "_png", lambda fig: drawn.append(fig) or "")
    return drawn


def test_the_page_leads_with_the_answer_a_plot_per_block_size_and_no_empty_sections(figures: list[Any]) -> None:
    rows = _rows(_candidates(host=HOSTILE))
    page = html.render(rows, ["generated"], [], 0.2)
    section = page.split("<h2>Which posting path</h2>")[1].split("<h2>")[0]
    assert page.index("Which posting path") < page.index("Per-link matrices")
    assert section.count("<figure>") == 3  # one plot per block size
    assert section.count("<tr>") == 1 + 3 * 2  # the header, and idle and within the budget per block size
    assert "<td>ce-armed</td><td>150.000</td><td>x1.030 [1.020-1.040]</td><td>0</td><td>0.8</td>" in section
    assert "<td>gpu</td><td>178.000</td><td>x1.300 [1.250-1.350]</td><td>0</td><td>-</td>" in section
    assert "<b>x</b>" not in page and "h&lt;b&gt;x&lt;/b&gt;$y$:gpu0" in section  # names escaped
    assert "<h2>Suspects</h2>" not in page and "Distribution" not in page  # one link: nothing to judge
    ax = figures[0].axes[0]  # 4 KiB: a point per candidate, the budget, the reference and the ceiling
    assert len(ax.containers) == 5 and len(ax.texts) == 5
    names = {text.get_text() for text in ax.texts}
    assert "gpu (8 SMs, green context), model carved 8 SMs" in names and "ce-armed" in names
    vertical = [line for line in ax.get_lines() if list(line.get_xdata()) == [BUDGET, BUDGET]]
    horizontal = [line.get_ydata()[0] for line in ax.get_lines() if len(set(line.get_ydata())) == 1]
    assert len(vertical) == 1 and 370.0 in horizontal and 395.0 in horizontal
    labels = ax.get_legend_handles_labels()[1]
    assert any("the model's budget: x1.050 (5%)" in label for label in labels)
    title = figures[0].axes[0].get_xlabel()
    assert "slowdown" in title
    assert all("$y$" not in text for fig in figures for text in _texts(fig))  # no name drawn as math


def _texts(fig: Any) -> list[str]:
    ax = fig.axes[0]
    return [t.get_text() for t in ax.texts] + ax.get_legend_handles_labels()[1]


def test_the_markdown_and_json_reports_carry_the_answer_with_its_costs(tmp_path: Path) -> None:
    rows = _rows(_candidates())
    markdown = format_markdown(rows, "none", 0.2, budget=parse_budget("10%"))
    assert "## Which posting path" in markdown and "within 10%" in markdown
    path = str(_write(tmp_path / "r.json", _candidates()))
    found = json.loads(run_cli_here(["report", path, "--format", "json", "--model-budget", "0.05"]).stdout)["answers"]
    small = found[0]
    assert small["budget"] == 1.05 and small["fastest_within_budget"]["path"] == "ce-armed"
    assert small["fastest_idle"]["slowdown_range"] == [1.25, 1.35] and len(small["candidates"]) == 5
    assert small["fastest_idle"]["cpu_us_per_descriptor"] is None and small["ceiling_gbps"] == 370.0


def test_compare_shows_the_answer_changed_with_its_costs(tmp_path: Path) -> None:
    base = str(_write(tmp_path / "base.json", _candidates(armed=False)))
    new = str(_write(tmp_path / "new.json", _candidates()))
    shown = run_cli_here(["compare", base, new])
    chosen = [line for line in shown.stdout.splitlines() if line.startswith(("* put", "  put"))]
    assert len(chosen) == 3, shown.stdout
    assert chosen[0].startswith("* ") and chosen[2].startswith("  ")  # 4 KiB changed; 1 MiB did not
    assert (
        "beside gemm:8192: gpu (8 SMs, green context), model carved 8 SMs 121.000 GB/s (model x1.040 "
        "[1.030-1.050], 8 SMs taken, CPU - us/descriptor) -> ce-armed 150.000 GB/s" in chosen[0]
    )
    as_json = json.loads(run_cli_here(["compare", base, new, "--format", "json", "--model-budget", "10%"]).stdout)
    small, middle = as_json["answers"][:2]  # at 10%, the carve-out of 16 both times at 4 KiB; not at 64 KiB
    assert small["changed"] is False and small["base"]["fastest_within_budget"]["carveout"] == 16
    assert small["new"]["fastest_within_budget"]["carveout"] == 16 and small["new"]["budget"] == pytest.approx(1.1)
    assert middle["changed"] is True and middle["base"]["fastest_within_budget"]["label"].startswith("gpu (8 SMs")
    assert middle["new"]["fastest_within_budget"]["cpu_us_per_descriptor"] == 0.8


def test_a_real_cpu_run_reports_its_answer_as_a_page(tmp_path: Path) -> None:
    """`run --test put --blocks 8 --posting cpu`, then `report --format html`: the page leads with the
    one path's answer and a plot per block size, and says in one line that no link could be judged."""
    results, page = tmp_path / "r.json", tmp_path / "r.html"
    args = ["run", "--np", "2", "--test", "put", "--blocks", "8", "--posting", "cpu", "--sizes", "4KiB,64KiB"]
    proc = run_cli([*args, "-o", str(results), *QUICK])
    assert proc.returncode == 0, proc.stderr
    proc = run_cli_here(["report", str(results), "--format", "html", "-o", str(page)])
    assert proc.returncode == 0, proc.stderr
    text = page.read_text()
    section = text.split("<h2>Which posting path</h2>")[1].split("<h2>")[0]
    assert section.count("<figure>") == 2 and section.count("<td>fastest on an idle GPU</td><td>cpu</td>") == 2
    assert "<h2>Suspects</h2>" not in text and "Distribution" not in text and "class='unjudged'" in text


def test_a_candidate_whose_cost_was_not_judged_is_named_with_why_and_not_drawn(figures: list[Any]) -> None:
    """GENERATED: the copy engines armed ahead move 345 GB/s at 64 KiB but were in flight for a quarter of
    the model's window, so no pair was judged: the table says why, the plot leaves the point out (at x1
    it would read as free) and its caption names it."""
    armed = _entry(64 * KIB, "ce-armed", 345.0, (344.0, 1.0, 0.0), cpu_us=0.55)
    armed["beside"] |= {"slowdown": None, "slowdown_range": None, "duty": 0.25, "slowdown_pairs": [1.0] * 5}
    rows = _rows([armed, _entry(64 * KIB, "gpu", 180.0, (305.0, 1.04, 0.01), ("budget", 8), 8), _reference(64 * KIB)])
    page = html.render(rows, ["generated"], [], 0.2)
    section = page.split("<h2>Which posting path</h2>")[1].split("<h2>")[0]
    assert "<td>ce-armed</td><td>345.000</td><td>not judged: in flight 25% of the window</td>" in section
    (fig,) = figures
    assert {text.get_text() for text in fig.axes[0].texts} == {"gpu (8 SMs), model carved 8 SMs"}
    assert "not drawn, their cost to the model not judged: ce-armed 345.0 GB/s (in flight 25% of the window)" in section


def test_records_read_back_malformed_are_judged_without_a_traceback() -> None:
    """A GPU record from a results file is untrusted: a missing list, a list that is not one and a
    value that is not a number leave that figure out instead of raising."""
    from rdmabench.measure.besiderecord import GpuFigure
    from rdmabench.measure.judging import judge_pairs, worse_pairs

    files = [{"duty_pairs": [0.95, 0.97]}, {"slowdown_pairs": [1.2, "x"], "drifting_pairs": 3, "lost_s_pairs": "y"}]
    gpus = [found for data in files if (found := GpuFigure.from_json({"load": "gemm:8192", **data})) is not None]
    assert len(gpus) == 2 and worse_pairs(gpus) == [1.2]
    found = judge_pairs(gpus, [1 << 30, 1 << 30])
    assert found.slowdowns == [1.2, None] and found.judged == [0] and found.lost_ms_per_gib == []
