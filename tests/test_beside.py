"""Block lists beside a model's compute (--beside, --posting lists, --posting-sms) and the answer the
report gives: which posting path for a block size, at what cost to the model.

CPU: the options' records and their one-line refusals, and the answer over rows (generated rows, and
the committed measurement of two H200s). GPU (`-m gpu`, two GPUs): every path validates every block
beside a GEMM, and the beside figures are there and sane."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rdmabench.errors import ConfigError, TransportError
from rdmabench.hardware.gpu import visible_gpu_count
from rdmabench.measure.beside import Beside
from rdmabench.measure.blocks import SmBudget
from rdmabench.results.files import document
from rdmabench.results.files.rows import Row, aggregate
from rdmabench.results.reports.answer import BUDGET, answers, lines, path_of

from .conftest import QUICK, StandInLoad, rdmabench_env, refused_in_one_line, run_cli

MEASURED = Path(__file__).resolve().parent.parent / "measurements" / "h200x2-20261126-beside"


@pytest.mark.parametrize(
    ("text", "expected"),
    [("none", None), ("gemm", ("gemm", 8192)), ("gemm:4096", ("gemm", 4096)), ("decode:2GiB", ("decode", 2 << 30))],
)
def test_a_compute_load_is_read_from_its_option(text: str, expected: tuple[str, int] | None) -> None:
    found = Beside.parse(text)
    assert (found.load, found.size) == expected if found else expected is None


@pytest.mark.parametrize("text", ["gemm:12", "gemm:x", "prefill", "decode:1KiB", "none:3"])
def test_a_bad_compute_load_is_refused(text: str) -> None:
    with pytest.raises(ConfigError, match="--beside"):
        Beside.parse(text)


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
    ],
)
def test_each_option_is_refused_in_one_line_before_any_rank_starts(
    tmp_path: Path, args: list[str], message: str
) -> None:
    refused_in_one_line(tmp_path, args, message)


@pytest.mark.skipif(visible_gpu_count() > 0, reason="a machine without a GPU")
def test_beside_compute_without_a_gpu_is_one_line(tmp_path: Path) -> None:
    proc = run_cli(["run", "--np", "2", *DEVICE_PUT, "--beside", "gemm", "-o", str(tmp_path / "r.json"), *QUICK])
    lines_out = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2 and len(lines_out) == 1 and "GPU" in lines_out[0], proc.stderr
    assert not (tmp_path / "r.json").exists()


def _row(path: str, size: int, gbps: float, beside: tuple[float, float] | None, load: str = "beside gemm:8192") -> Row:
    """A generated report row of a 1,024-block list (its settings as settings_of writes them, its posting
    as entries.posting_of reads it)."""
    posted = {"gpu": ", posted by the GPU", "ce-batch": ", posted to the copy engines", "cpu": ""}[path]
    shape = f"1024 x random, 1 in flight{posted}"
    row = Row("put", "device", "device", size, "h:gpu0 -> h:gpu1", "intra-node", "h", "h", "GB/s", load)
    row.settings = (("engine", "native"), ("blocks", shape))
    row.posting = (path, None, False)
    row.values = [gbps]
    row.besides = [beside] if beside else None
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
    assert "no path" not in lines([found])[1] and "ce-batch 77.000 GB/s (model x1.040)" in lines([found])[1]


def test_no_path_within_the_budget_is_said() -> None:
    rows = [_row("gpu", 4096, 60.0, (178.0, 1.20)), _row("ce-batch", 4096, 7.0, (7.4, BUDGET + 0.01))]
    (found,) = answers(rows)
    assert found.within is None and "no path within the budget" in lines([found])[1]
    assert [point.path for point in found.front] == ["gpu", "ce-batch"]  # each beats the other in one of the two


def test_one_path_alone_has_no_choice_to_answer_and_references_are_left_out() -> None:
    only = _row("gpu", 4096, 170.0, None, load="alone")
    reference = _row("ce-batch", 4 << 20, 200.0, None, load="alone")
    reference.settings = (("blocks", "1 x contiguous, 1 in flight, posted to the copy engines"),)
    assert answers([only, reference]) == []
    assert path_of(only) == "gpu" and path_of(_row("cpu", 8, 1.0, None)) == "cpu"


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
    assert [entry["blocks"]["posted_by"] for entry in lists] == ["gpu", "ce-batch", "cpu"]
    for entry in lists:
        beside = entry["beside"]
        assert entry["validated"] and beside["load"] == "gemm:2048" and beside["transfer_alone"] > 0
        assert beside["slowdown"] >= 0.9 and beside["pairs"] >= 1 and sorted(beside["gpus"]) == ["0", "1"]
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
    failed = run_cli(["check", path, "--expect", "slowdown=1.5"])
    assert failed.returncode == 1, failed.stdout + failed.stderr
    fails = [line for line in failed.stdout.splitlines() if line.startswith("FAIL")]
    assert len(fails) == 1 and "posted by the GPU" in fails[0] and "above the ceiling of 1.5x" in fails[0], fails
    passed = run_cli(["check", path, "--expect", "slowdown=4"])
    assert passed.returncode == 0 and passed.stdout.splitlines()[-1] == "verdict: PASS", passed.stdout
    refused = run_cli(["check", path, "--expect", "slowdown=0.5"])
    assert refused.returncode == 2 and "a factor of at least 1" in refused.stderr


def test_compare_says_how_the_answer_changed_between_two_runs() -> None:
    """The two committed runs of two H200s (the alone window before and after 9b721f0): `compare`
    puts each block size's choice side by side and marks where it changed."""
    base, new = str(MEASURED / "bracket-mean" / "all-gemm.json"), str(MEASURED / "all-gemm.json")
    shown = run_cli(["compare", base, new])
    lines = shown.stdout.splitlines()
    first = lines.index(
        "which posting path, BASE -> NEW (idle; within the load's slowdown budget); * where the choice changed:"
    )
    chosen = lines[first + 1 : first + 4]
    assert [line.split(": idle")[0].split()[-1] for line in chosen] == ["4KiB", "64KiB", "1MiB"], chosen
    assert chosen[2].startswith("* ") and "beside gemm:8192: none -> ce-batch" in chosen[2]
    assert chosen[1].startswith("  ")  # the copy engines both times within the budget at 64 KiB
    as_json = run_cli(["compare", base, new, "--format", "json"])
    answers = json.loads(as_json.stdout)["answers"]
    assert [one["changed"] for one in answers] == [True, False, True]
    assert (
        answers[2]["base"]["fastest_within_budget"] is None
        and answers[2]["new"]["fastest_within_budget"]["path"] == "ce-batch"
    )


@pytest.mark.parametrize("ring", [1 << 16, 100])
def test_a_pairs_halves_are_the_operations_alone_and_beside_also_past_the_ring(ring: int) -> None:
    """Beside the steps each operation took twice as long: the slowdown reads 2, also where the
    library kept only the latest `ring` operations (the window before is gone; what is kept of the
    shared half and the window after stands)."""
    from rdmabench.measure.beside import Beside, Pairs

    load = StandInLoad(step=1, ring=ring)
    pairs = Pairs(Beside("gemm", 1024), load, partitioned=False)
    for _ in range(3):
        pairs.start()
        load.busy = True
        for _ in range(100):
            load.done()  # the steps run: the load finishes operations beside them
        load.busy = False
        pairs.stop()
    found = pairs.summary()
    assert found["slowdown_pairs"] == [2.0, 2.0, 2.0] and found["slowdown"] == 2.0
    assert (found["alone_drift"] is None) == (ring == 100)  # no window before once it wrapped


def test_a_load_that_failed_says_why_at_once_not_after_the_stall_limit() -> None:
    """The load's thread ended on a CUDA error: the pair's next wait raises the library's own reason
    right away (the stall limit, a minute, is for a load that stops without one)."""
    import time

    from rdmabench.measure.beside import STALLED_SECONDS, Beside, Pairs

    load = StandInLoad(step=1, ring=100)
    load.error = "waiting for a load operation: an illegal memory access was encountered"
    began = time.perf_counter()
    with pytest.raises(TransportError, match="illegal memory access"):
        Pairs(Beside("gemm", 1024), load, partitioned=False).start()
    assert time.perf_counter() - began < STALLED_SECONDS / 10


def test_the_worse_gpu_is_taken_pair_by_pair() -> None:
    """Each pair's slowdown is the worse of the GPUs that measured it; a pair no GPU measured is left out."""
    from rdmabench.measure.beside import worse_pairs

    gpus = [{"slowdown_pairs": [1.1, None, None, 0.9]}, {"slowdown_pairs": [1.0, 1.2, None, 1.3]}]
    assert worse_pairs(gpus) == [1.1, 1.2, 1.3]
