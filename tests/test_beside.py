"""Block lists beside a model's compute (--beside, --posting lists, --posting-sms) and the answer the
report gives: which posting path for a block size, at what cost to the model.

CPU: the options' records and their one-line refusals, and the answer over rows (generated rows, and
the committed measurement of two H200s). GPU (`-m gpu`, two GPUs): every path validates every block
beside a GEMM, and the beside figures are there and sane."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from rdmabench.errors import ConfigError
from rdmabench.hardware.gpu import visible_gpu_count
from rdmabench.measure.beside import Beside, asked
from rdmabench.measure.besiderecord import BesideFigure
from rdmabench.measure.blocks import SmBudget
from rdmabench.measure.pairs import MAX_PAIRS
from rdmabench.results.files import document
from rdmabench.results.files.rowgroups import BesideCompute, BesideRun, ListFigures
from rdmabench.results.files.rows import Row, aggregate
from rdmabench.results.reports.answer import BUDGET, answers, lines, notes

from .conftest import QUICK, rdmabench_env, refused_in_one_line, run_cli, run_cli_here

MEASURED = Path(__file__).resolve().parent.parent / "measurements" / "h200x2-20261126-beside"


@pytest.mark.parametrize(
    ("text", "expected"),
    [("none", None), ("gemm", ("gemm", 8192)), ("gemm:4096", ("gemm", 4096)), ("decode:2GiB", ("decode", 2 << 30))],
)
def test_a_compute_load_is_read_from_its_option(text: str, expected: tuple[str, int] | None) -> None:
    found = asked(text)
    assert (found.load, found.size) == expected if found else expected is None


@pytest.mark.parametrize("text", ["gemm:12", "gemm:x", "prefill", "decode:1KiB", "none:3"])
def test_a_bad_compute_load_is_refused(text: str) -> None:
    with pytest.raises(ConfigError, match="--beside"):
        asked(text)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("gemm", [("gemm:8192", 0)]),
        ("gemm:4096,carveout=8", [("gemm:4096,carveout=8", 8)]),
        ("gemm,carveout=0", [("gemm:8192", 0)]),
        ("gemm,carveout=all", [("gemm:8192", 0), *((f"gemm:8192,carveout={n}", n) for n in (4, 8, 16))]),
        ("decode,carveout=0", [("decode:1GiB", 0)]),
        ("none", []),
    ],
)
def test_a_carve_out_is_read_as_one_load_each(text: str, expected: list[tuple[str, int]]) -> None:
    """`carveout=all` sweeps 0, 4, 8 and 16 SMs, each its own load with its own label (none: the
    whole GPU's label of old)."""
    found = asked(text)
    assert [(load.label, load.carveout) for load in (found.each if found else [])] == expected
    for load in found.each if found else []:  # a results file's label reads back as the load
        assert Beside.from_label(load.label) == load


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("gemm,carveout=-1", "carveout takes 0 to 1024 SMs or all, not '-1'"),
        ("gemm,carveout=x", "carveout takes 0 to 1024"),
        ("gemm,carveout=2000", "carveout takes 0 to 1024"),
        ("gemm,carveout=", "carveout takes 0 to 1024"),
        ("gemm,carveout=²", "carveout takes 0 to 1024 SMs or all, not '²'"),  # isdigit() says yes, int() no
        ("gemm,carveout=٣", "carveout takes 0 to 1024"),  # int() would read 3
        ("gemm:٣٠٠", "is not a size for gemm"),
        ("gemm,carve=8", "is not carveout=N"),
        ("gemm,carveout=4,carveout=8", "given once"),
        ("decode,carveout=8", "decode has none"),
        ("decode,carveout=all", "decode has none"),
    ],
)
def test_a_bad_carve_out_is_refused(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match="--beside") as raised:
        asked(text)
    assert message in str(raised.value) and "\n" not in str(raised.value)


@pytest.mark.parametrize(("text", "expected"), [("8", (8, False)), ("green:16", (16, True)), ("all", None)])
def test_an_sm_budget_is_read_from_its_option(text: str, expected: tuple[int, bool] | None) -> None:
    found = SmBudget.parse(text)
    assert (found.sms, found.green) == expected if found else expected is None


@pytest.mark.parametrize("text", ["green:0", "blue:8", "x", "-1", "2000"])
def test_a_bad_sm_budget_is_refused(text: str) -> None:
    with pytest.raises(ConfigError, match="--posting-sms"):
        SmBudget.parse(text)


DEVICE_PUT = ["--test", "put", "--mode", "device"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--beside", "gemm"], "use --mode device at both ends"),
        ([*DEVICE_PUT, "--beside", "gemm:12"], "--beside gemm:M takes M from 256"),
        ([*DEVICE_PUT, "--blocks", "8", "--posting-sms", "green:8"], "give --beside"),
        ([*DEVICE_PUT, "--blocks", "8", "--posting", "cpu", "--posting-sms", "8"], "give --posting gpu, auto or all"),
        (["--test", "put", "--blocks", "8", "--posting", "gpu,cpu"], "--mode device"),
        (["--test", "put", "--blocks", "8", "--posting", "ce-batch"], "--mode device"),
        ([*DEVICE_PUT, "--blocks", "8", "--posting", "gpu,bogus"], "unknown --posting 'bogus'"),
        ([*DEVICE_PUT, "--posting-sms", "8"], "give --blocks N as well"),
        (["--test", "lat", "--mode", "device", "--beside", "gemm"], "not --test lat"),
        (["--mode", "device", "--pattern", "ring", "--beside", "gemm"], "one link at a time"),
        ([*DEVICE_PUT, "--beside", "gemm,carveout=-1"], "carveout takes 0 to 1024 SMs or all"),
        ([*DEVICE_PUT, "--beside", "decode,carveout=8"], "decode has none"),
        (
            [*DEVICE_PUT, "--blocks", "8", "--posting-sms", "green:8", "--beside", "gemm,carveout=8"],
            "both set the transfer's SMs",
        ),
    ],
)
def test_each_option_is_refused_in_one_line_before_any_rank_starts(
    tmp_path: Path, args: list[str], message: str
) -> None:
    refused_in_one_line(tmp_path, args, message)


@pytest.mark.skipif(visible_gpu_count() > 0, reason="a machine without a GPU")
def test_beside_compute_without_a_gpu_is_one_line(tmp_path: Path) -> None:
    proc = run_cli_here(["run", "--np", "2", *DEVICE_PUT, "--beside", "gemm", "-o", str(tmp_path / "r.json"), *QUICK])
    lines_out = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2 and len(lines_out) == 1 and "GPU" in lines_out[0], proc.stderr
    assert not (tmp_path / "r.json").exists()


_LOAD = {"load": "gemm:8192"}  # what every entry's `beside` names


def _row(path: str, size: int, gbps: float, beside: tuple[float, float] | None, load: str = "beside gemm:8192") -> Row:
    """A generated report row of a 1,024-block list (its settings as settings_of writes them, its posting
    as entries.posting_of reads it)."""
    posted = {"gpu": ", posted by the GPU", "ce-batch": ", posted to the copy engines", "cpu": ""}[path]
    shape = f"1024 x random, 1 in flight{posted}"
    row = Row("put", "device", "device", size, "h:gpu0 -> h:gpu1", "intra-node", "h", "h", "GB/s", load)
    row.settings = (("engine", "native"), ("blocks", shape))
    row.lists = ListFigures(path, block_list="1024 x random, 1 in flight")  # the fields the answer reads
    row.values = [gbps]
    if load != "alone":  # the model beside it, as fields
        row.compute = BesideCompute("gemm", 8192, 0, path, [BesideRun(*beside)] if beside else [])
    return row


def test_the_answer_is_the_fastest_idle_path_and_the_fastest_within_the_budget() -> None:
    """GENERATED rows: three paths at one block size beside a GEMM. Idle, the GPU's kernel is fastest;
    within 5% only the copy engines and the CPU are; the front leaves out what another beats in both."""
    rows = [
        _row("gpu", 65536, 43.0, (344.0, 1.10)),
        _row("ce-batch", 65536, 77.0, (81.0, 1.04)),
        _row("cpu", 65536, 15.0, (16.0, 1.05)),
    ]
    (found,) = answers(rows)
    assert found.idle is not None and (found.idle.path, found.idle.gbps) == ("gpu", 344.0)
    assert found.within is not None and (found.within.path, found.within.gbps) == ("ce-batch", 77.0)
    assert [point.path for point in found.front] == ["ce-batch"]  # cpu is slower and costs more
    assert "no path" not in lines([found])[1] and "ce-batch 77.000 GB/s (model x1.040, SMs held 0" in lines([found])[1]


def test_no_path_within_the_budget_is_said() -> None:
    rows = [_row("gpu", 4096, 60.0, (178.0, 1.20)), _row("ce-batch", 4096, 7.0, (7.4, BUDGET + 0.01))]
    (found,) = answers(rows)
    assert found.within is None and "no path within the budget" in lines([found])[1]
    assert [point.path for point in found.front] == ["gpu", "ce-batch"]  # each beats the other in one of the two


@pytest.mark.parametrize(
    ("beside", "said"),
    [
        ({**_LOAD, "slowdown": None, "duty": 0.25, "slowdown_pairs": [1.0] * 5}, "not judged: in flight 25% of the window"),
        ({**_LOAD, "slowdown": None, "duty": 0.95, "slowdown_pairs": [1.0] * 2, "drifting_pairs": [0, 1]},
         "not judged: the model alone drifted past 3% in every pair"),
        ({**_LOAD, "slowdown": None, "duty": None, "slowdown_pairs": []}, None),
        ({**_LOAD, "slowdown": None, "duty": 0.95, "slowdown_pairs": [1.0], "drifting_pairs": 5}, None),  # malformed
    ],
)  # fmt: skip
def test_a_path_whose_model_figure_was_not_judged_says_why(beside: dict[str, Any], said: str | None) -> None:
    """GENERATED rows: the copy engines armed ahead move the most, but their copies were in flight for
    a quarter of the load's window (or the load drifted): the answer names them idle by their figure alone
    (344, never their 345 beside the load), says why their model cost is no figure, and never picks them
    within the budget."""
    armed = _row("ce-batch", 65536, 345.0, None)
    assert armed.lists is not None
    armed.lists.posting = "ce-armed"
    figure = BesideFigure.from_json({**beside, "transfer_alone": 344.0})  # as the rows read a file's, once
    assert figure is not None
    armed.add_beside(figure, "ce-armed", first=False)
    rows = [armed, _row("gpu", 65536, 180.0, (305.0, 1.04))]
    (found,) = answers(rows)
    assert found.idle is not None and (found.idle.path, found.idle.gbps) == ("ce-armed", 344.0)
    assert "model" not in lines([found])[1].split("; ")[0]  # an idle figure carries no beside words
    said_notes = [note for note in notes([found]) if "not judged" in note]
    assert said_notes == ([f"ce-armed at 64KiB: the model's cost {said}"] if said else [])
    assert found.within is not None and found.within.path == "gpu"


def test_one_path_alone_has_no_choice_to_answer_and_references_are_left_out() -> None:
    only = _row("gpu", 4096, 170.0, None, load="alone")
    reference = _row("ce-batch", 4 << 20, 200.0, None, load="alone")
    assert reference.lists is not None
    reference.lists.block_list = None  # a list's one-message reference is no candidate
    assert answers([only, reference]) == []


def test_the_committed_measurement_answers_per_block_size() -> None:
    """The run of two H200s (measurements/h200x2-20261126-beside): every posting path beside a GEMM,
    read back through the report's rows; the answer names a path for each block size it measured."""
    path = str(MEASURED / "all-gemm.json")
    rows = aggregate([(path, document.load(path, lazy=True))])
    found = {answer.size_bytes: answer for answer in answers(rows)}
    assert sorted(found) == [4096, 65536, 1 << 20]
    for answer in found.values():
        assert answer.load == "beside gemm:8192" and answer.idle is not None and answer.front
        assert {point.path for point in answer.front} <= {"gpu", "ce-batch", "cpu"}
    assert found[1 << 20].idle is not None and found[1 << 20].idle.path == "gpu"  # the kernel, idle


TWO_GPUS = pytest.mark.skipif(visible_gpu_count() < 2, reason="beside compute needs a GPU for each rank")


def _run(args: list[str], results_path: Path, **env: str) -> dict:  # type: ignore[type-arg]
    proc = run_cli(["run", "--np", "2", "-o", str(results_path), *QUICK, *args], env=rdmabench_env(**env))
    assert proc.returncode == 0, proc.stderr
    return document.load(str(results_path))


@pytest.mark.gpu
@TWO_GPUS
def test_every_path_validates_every_block_beside_a_gemm(results_path: Path) -> None:
    args = [*DEVICE_PUT, "--blocks", "64", "--block-size", "16KiB", "--layout", "random", "--posting", "all"]
    results = _run([*args, "--beside", "gemm:2048"], results_path)["results"]
    lists = [entry for entry in results if entry["blocks"]["count"] == 64]
    assert [entry["blocks"]["posted_by"] for entry in lists] == ["gpu", "ce-batch", "ce-armed", "cpu"]
    for entry in lists:
        beside = entry["beside"]
        assert entry["validated"] and beside["load"] == "gemm:2048" and beside["transfer_alone"] > 0
        assert beside["slowdown"] is None or beside["slowdown"] >= 0.9, beside
        # --samples 2 pairs, then more while an interval is wider than +-2 points (at most MAX_PAIRS)
        assert sorted(beside["gpus"]) == ["0", "1"] and 2 <= len(beside["slowdown_pairs"]) <= MAX_PAIRS
        assert beside["duty"] > 0
        assert all(gpu["alone"] > 0 and gpu["beside"] > 0 for gpu in beside["gpus"].values())
        assert entry["blocks"]["contiguous_posted_by"] in ("gpu", "ce-batch")


@pytest.mark.gpu
@TWO_GPUS
def test_a_green_partition_holds_the_posting_kernel_to_its_sms(results_path: Path) -> None:
    args = [*DEVICE_PUT, "--blocks", "64", "--block-size", "64KiB", "--posting", "gpu", "--posting-sms", "green:8"]
    entry = _run([*args, "--beside", "gemm:2048"], results_path)["results"][-1]
    sms = entry["blocks"]["sms"]
    assert entry["validated"] and sms["mode"] == "green" and sms["transfer"] >= 8 and sms["load"] > 0
    # The kernel runs on the initiator's GPU (rank 0's): its load ran on the partition's other SMs.
    assert entry["beside"]["gpus"]["0"]["load_sms"] > 0


@pytest.mark.gpu
@TWO_GPUS
def test_a_carve_out_plans_the_gemm_for_fewer_sms_and_holds_the_kernel_to_them(results_path: Path) -> None:
    """--beside gemm,carveout=8: the GEMM through cuBLASLt for the GPU's SMs less 8, the GPU's posting
    kernel on a grid of 8 x 4; every block checked; the carve-out's own cost beside the slowdown."""
    args = [*DEVICE_PUT, "--blocks", "64", "--block-size", "64KiB", "--layout", "random", "--posting", "gpu"]
    entry = _run([*args, "--beside", "gemm:4096,carveout=8"], results_path)["results"][-1]
    beside, sms = entry["beside"], entry["blocks"]["sms"]
    assert entry["validated"] and entry["wrong_bytes"] == 0 and entry["blocks"]["posted_by"] == "gpu"
    assert sms == {"mode": "carveout", "transfer": 8, "ctas": 32}, sms
    assert beside["load"] == "gemm:4096,carveout=8" and beside["carveout"] == 8
    assert 0.8 < beside["carveout_cost"] < 2.0 and all(g["carveout_cost"] for g in beside["gpus"].values())
    assert all(g["settle"]["windows"] >= 2 for g in beside["gpus"].values())


@pytest.mark.gpu
@TWO_GPUS
def test_carve_outs_all_are_swept_for_the_gpu_path_only(results_path: Path) -> None:
    """carveout=all: the GPU's path beside 0, 4, 8 and 16 carved SMs, each its own entry; the copy
    engines (which take no SMs) beside the whole GPU's GEMM only."""
    args = [*DEVICE_PUT, "--blocks", "32", "--block-size", "16KiB", "--posting", "gpu,ce-batch"]
    results = _run([*args, "--beside", "gemm:2048,carveout=all"], results_path)["results"]
    lists = [(e["blocks"]["posted_by"], e["beside"]["carveout"]) for e in results if e["blocks"]["count"] == 32]
    assert lists == [("gpu", 0), ("gpu", 4), ("gpu", 8), ("gpu", 16), ("ce-batch", 0)], lists
    assert all(e["validated"] for e in results)


@pytest.mark.gpu
@TWO_GPUS
def test_the_gpu_path_at_1mib_costs_the_gemm_what_it_loses_while_it_runs(results_path: Path) -> None:
    """The GPU's kernel moving 1,024 random 1 MiB blocks holds every SM: kept in flight through the
    GEMM's whole window it slows it about 3x on H100s (FIELD_NOTES); a median of a few transfers in
    a long window read 1.03x. GPUs vary: above 1.5 only, with the duty and cost per GiB sane. A GEMM
    stalled this hard often runs faster alone just after (its clocks up): pairs whose alone windows
    drifted are marked and judged all the same (their swing widens the interval), so every pair's
    reading is checked, and the row's figure with its interval (on 2 x H200 the benchmark's row judged
    0 of 5 pairs in two runs when drifting pairs were left out)."""
    args = [*DEVICE_PUT, "--blocks", "1024", "--block-size", "1MiB", "--layout", "random", "--posting", "gpu"]
    entry = _run([*args, "--beside", "gemm", "--samples", "3"], results_path)["results"][-1]
    beside = entry["beside"]
    pairs = [s for s in beside["slowdown_pairs"] if s is not None]
    assert entry["validated"] and len(pairs) == 3 and min(pairs) > 1.5, beside
    assert beside["duty"] >= 0.9 and beside["model_ms_per_gib"] > 0, beside
    low, high = beside["slowdown_interval"]
    assert beside["slowdown"] > 1.5 and low <= beside["slowdown"] <= high and beside["pairs_used"] >= 2, beside
    assert beside["carveout"] == 0 and beside["carveout_cost"] is None


@pytest.mark.gpu
@TWO_GPUS
def test_device_bw_beside_decode_carries_both_halves(results_path: Path) -> None:
    (entry,) = _run(["--test", "bw", "--mode", "device", "--sizes", "1MiB", "--beside", "decode"], results_path)[
        "results"
    ]
    assert entry["beside"]["unit"] == "GB/s" and entry["beside"]["transfer_alone"] > 0


@pytest.mark.gpu
@pytest.mark.skipif(visible_gpu_count() == 0, reason="needs a GPU")
def test_two_ranks_on_one_gpu_are_refused_beside_compute(tmp_path: Path) -> None:
    proc = run_cli(
        ["run", "--np", "2", *DEVICE_PUT, "--beside", "gemm", "-o", str(tmp_path / "r.json"), *QUICK],
        env=rdmabench_env(CUDA_VISIBLE_DEVICES="0"),
    )
    assert proc.returncode == 2 and "share GPU" in proc.stderr and not (tmp_path / "r.json").exists(), proc.stderr


def test_check_holds_a_link_beside_compute_to_a_slowdown_ceiling(tmp_path: Path) -> None:
    """`check --expect slowdown=F` on the committed run of two H200s: the kernel posting 1 MiB blocks
    slowed the GEMM about 3x, so a 1.5x ceiling fails it (and passes the copy engines and the CPU),
    while a ceiling above every slowdown passes all."""
    path = str(MEASURED / "all-gemm.json")
    failed = run_cli_here(["check", path, "--expect", "slowdown=1.5"])
    assert failed.returncode == 1, failed.stdout + failed.stderr
    fails = [line for line in failed.stdout.splitlines() if line.startswith("FAIL")]
    assert len(fails) == 1 and "posted by gpu on the whole GPU" in fails[0], fails
    assert "above the ceiling of x1.5" in fails[0]
    assert not any(line.startswith("failing gpus") for line in failed.stdout.splitlines())  # the path's, not theirs
    passed = run_cli_here(["check", path, "--expect", "slowdown=4"])
    assert passed.returncode == 0 and passed.stdout.splitlines()[-1] == "verdict: PASS", passed.stdout
    refused = run_cli_here(["check", path, "--expect", "slowdown=0.5"])
    assert refused.returncode == 2 and "a factor of at least 1" in refused.stderr


def test_compare_says_how_the_answer_changed_between_two_runs() -> None:
    """The two committed runs of two H200s (the alone window before and after 9b721f0): `compare`
    puts each block size's choice side by side and marks where it changed."""
    base, new = str(MEASURED / "bracket-mean" / "all-gemm.json"), str(MEASURED / "all-gemm.json")
    shown = run_cli_here(["compare", base, new])
    lines = shown.stdout.splitlines()
    first = lines.index(
        "which posting path, BASE -> NEW (idle; within the load's slowdown budget of 5%), each with its costs; "
        "* where the choice changed:"
    )
    chosen = lines[first + 1 : first + 4]
    assert [line.split(": idle")[0].split()[-1] for line in chosen] == ["4KiB", "64KiB", "1MiB"], chosen
    assert chosen[2].startswith("* ") and "beside gemm:8192: none -> ce-batch" in chosen[2]
    assert chosen[1].startswith("  ")  # the copy engines both times within the budget at 64 KiB
    as_json = run_cli_here(["compare", base, new, "--format", "json"])
    answers = json.loads(as_json.stdout)["answers"]
    assert [one["changed"] for one in answers] == [True, False, True]
    assert (
        answers[2]["base"]["fastest_within_budget"] is None
        and answers[2]["new"]["fastest_within_budget"]["path"] == "ce-batch"
    )
