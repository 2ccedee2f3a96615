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

from rdmabench.errors import ConfigError, TransportError
from rdmabench.hardware.gpu import visible_gpu_count
from rdmabench.measure.beside import Beside, Pairs
from rdmabench.measure.blocks import SmBudget
from rdmabench.results.files import document
from rdmabench.results.files.rows import Row, aggregate
from rdmabench.results.reports.answer import BUDGET, answers, lines

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
    assert [(load.label, load.carveout) for load in Beside.parse_all(text)] == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("gemm,carveout=-1", "carveout takes 0 to 1024 SMs or all, not '-1'"),
        ("gemm,carveout=x", "carveout takes 0 to 1024"),
        ("gemm,carveout=2000", "carveout takes 0 to 1024"),
        ("gemm,carveout=", "carveout takes 0 to 1024"),
        ("gemm,carve=8", "is not carveout=N"),
        ("gemm,carveout=4,carveout=8", "given once"),
        ("decode,carveout=8", "decode has none"),
        ("decode,carveout=all", "decode has none"),
    ],
)
def test_a_bad_carve_out_is_refused(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match="--beside") as raised:
        Beside.parse_all(text)
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
    row.posting, row.block_list = path, "1024 x random, 1 in flight"  # the fields the answer reads
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
    assert "no path" not in lines([found])[1] and "ce-batch 77.000 GB/s (model x1.040, 0 SMs" in lines([found])[1]


def test_no_path_within_the_budget_is_said() -> None:
    rows = [_row("gpu", 4096, 60.0, (178.0, 1.20)), _row("ce-batch", 4096, 7.0, (7.4, BUDGET + 0.01))]
    (found,) = answers(rows)
    assert found.within is None and "no path within the budget" in lines([found])[1]
    assert [point.path for point in found.front] == ["gpu", "ce-batch"]  # each beats the other in one of the two


@pytest.mark.parametrize(
    ("beside", "said"),
    [
        ({"slowdown": None, "duty": 0.25, "slowdown_pairs": [1.0] * 5}, "model not judged: in flight 25% of the window"),
        ({"slowdown": None, "duty": 0.95, "slowdown_pairs": [1.0] * 2, "drifting_pairs": [0, 1]},
         "model not judged: the model alone drifted past 3% in every pair"),
        ({"slowdown": None, "duty": None, "slowdown_pairs": []}, "model -"),
        ({"slowdown": None, "duty": 0.95, "slowdown_pairs": [1.0], "drifting_pairs": 5}, "model -"),  # malformed
    ],
)  # fmt: skip
def test_a_path_whose_model_figure_was_not_judged_says_why(beside: dict[str, Any], said: str) -> None:
    """GENERATED rows: the copy engines armed ahead move the most, but their copies were in flight for
    a quarter of the load's window (or the load drifted): the answer names them idle and says why their
    model cost is no figure, and never picks them within the budget."""
    armed = _row("ce-batch", 65536, 345.0, None)
    armed.posting = "ce-armed"
    armed.add_list({}, beside, [], first=False)
    rows = [armed, _row("gpu", 65536, 180.0, (305.0, 1.04))]
    (found,) = answers(rows)
    assert found.idle is not None and found.idle.path == "ce-armed" and said in lines([found])[1]
    assert found.within is not None and found.within.path == "gpu"


def test_one_path_alone_has_no_choice_to_answer_and_references_are_left_out() -> None:
    only = _row("gpu", 4096, 170.0, None, load="alone")
    reference = _row("ce-batch", 4 << 20, 200.0, None, load="alone")
    reference.block_list = None  # a list's one-message reference is no candidate
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
        assert sorted(beside["gpus"]) == ["0", "1"] and len(beside["slowdown_pairs"]) == 2 and beside["duty"] > 0
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
    a long window read 1.03x. GPUs vary: above 1.5 only, with the duty and cost per GiB sane."""
    args = [*DEVICE_PUT, "--blocks", "1024", "--block-size", "1MiB", "--layout", "random", "--posting", "gpu"]
    entry = _run([*args, "--beside", "gemm", "--samples", "3"], results_path)["results"][-1]
    beside = entry["beside"]
    assert entry["validated"] and beside["slowdown"] is not None and beside["slowdown"] > 1.5, beside
    low, high = beside["slowdown_range"]
    assert low <= beside["slowdown"] <= high and beside["duty"] >= 0.9 and beside["model_ms_per_gib"] > 0, beside
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
        "which posting path, BASE -> NEW (idle; within the load's slowdown budget of 5%), each with its costs; "
        "* where the choice changed:"
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


def _one_pair(pairs: Pairs, load: StandInLoad, busy_share: float) -> None:
    """A pair on a stand-in load: its operations take `beside` seconds (the transfer in flight) for
    the first `busy_share` of the shared window, then `alone` again."""
    pairs.begin()
    pairs.open()
    busy = round(pairs.operations * busy_share)
    load.busy = True
    while load.done() < pairs._open.first + busy:
        pass
    load.busy = False
    while not pairs.over():
        pass
    pairs.close(1.0)
    pairs.keep(0, False)


@pytest.mark.parametrize(("busy_share", "expected"), [(1.0, 2.0), (0.5, 1.5), (0.25, 1.25)])
def test_the_slowdown_is_the_work_lost_over_the_whole_window(busy_share: float, expected: float) -> None:
    """The load's operations take twice as long while a transfer is in flight, for a known share of
    the shared window: the slowdown reads that share (a median over the window would read 1 or 2)."""
    load = StandInLoad(step=1, ring=1 << 16)
    pairs = Pairs(Beside("gemm", 1024), load, partitioned=False)
    pairs.settle()
    assert pairs.settled["settled"] and pairs.settled["windows"] == 2 and pairs.operations == 80  # 80 ms at 1 ms
    for _ in range(3):
        _one_pair(pairs, load, busy_share)
    found = pairs.summary()
    assert found["slowdown_pairs"] == [expected] * 3 and found["slowdown"] == expected
    assert found["operations"] == [80] * 3 and found["duty_pairs"] == [1.0] * 3
    assert found["lost_s_pairs"] == [pytest.approx(80 * busy_share * 1e-3)] * 3  # 1 ms lost a busy operation
    assert found["alone_drift"] == 0.0 and found["drifting_pairs"] == [] and found["carveout_cost"] is None


@pytest.mark.parametrize("ring", [1 << 16, 1000])
def test_what_is_kept_of_the_window_stands_past_the_ring(ring: int) -> None:
    """The library keeps only the latest `ring` operations: where the window before is gone, the
    window and the one after still give the slowdown (and no drift is claimed)."""
    load = StandInLoad(step=1, ring=ring)
    pairs = Pairs(Beside("gemm", 1024), load, partitioned=False)
    # A window longer than the ring: the window before is gone (what follows it, 0.15 + 0.08 s of polls
    # each finishing one operation, holds at most 460 of the ring's 1000)
    pairs.operations = 2000
    for _ in range(2):
        _one_pair(pairs, load, 1.0)
    found = pairs.summary()
    assert found["slowdown_pairs"] == [2.0, 2.0] and (found["alone_drift"] is None) == (ring == 1000)


def test_a_carve_out_costs_its_own_share_and_the_slowdown_stays_against_the_whole_gpu() -> None:
    """The carved GEMM alone runs 1.1x the whole GPU's: carveout_cost reads 1.1; the shared window runs
    the carved plan, and its slowdown is taken against the whole GPU alone (1.1 x 2 = 2.2)."""
    load = StandInLoad(step=1, ring=1 << 16, carved=1.1)
    pairs = Pairs(Beside("gemm", 1024, carveout=8), load, partitioned=False)
    pairs.settle()
    assert load.carveout == 8 and pairs.carveout_cost == pytest.approx(1.1)
    _one_pair(pairs, load, 1.0)
    found = pairs.summary()
    assert found["carveout"] == 8 and found["carveout_cost"] == 1.1 and found["slowdown_pairs"] == [2.2]


class _End:
    """What _Steps reads of a round's end: the protocol's fill and check, the planted stall, the ranks."""

    def __init__(self, clock: list[float]):
        self.clock, self.stall_at, self.checked = clock, None, list[int]()
        self.spec = self
        self.protocol = self
        self.ranks = [0]
        self.where, self.rank, self.links = "here", 0, [self]  # what a slow step names (measure/slow.py)
        self.src = 0
        self.spans = True  # whether this end's steps span its transfers (the initiator's do)

    def spans_transfers(self, end: object) -> bool:
        return self.spans

    def fill(self, end: object, index: int) -> None:
        self.clock[0] += 5.0  # untimed, before the shared half's clock starts

    def check(self, end: object, index: int) -> None:
        self.checked.append(index)

    def ahead(self, end: object, index: int) -> None:
        self.aheads = getattr(self, "aheads", 0) + 1


def test_the_duty_is_the_shared_halfs_time_in_steps(monkeypatch: pytest.MonkeyPatch) -> None:
    """A clock of the test's own: each step takes 3 s and each agreement between batches 1 s, so a
    transfer is in flight for 3/4 of the shared half; with 4 steps a batch, 12/13. The payload is
    written once and checked once, after the last step."""
    import functools
    import types

    from rdmabench.measure import round as engine

    clock = [0.0]
    monkeypatch.setattr(engine, "time", types.SimpleNamespace(perf_counter=lambda: clock[0], process_time=lambda: 0.0))
    for batch, duty in ((1, 0.75), (4, 12 / 13)):
        end = _End(clock)

        def step(end: object, index: int) -> list[float]:
            clock[0] += 3.0
            return [3.0]

        seen: list[float] = []

        def agree(over: bool, step_seconds: float, batch: int = batch, seen: list[float] = seen) -> tuple[bool, int]:
            seen.append(step_seconds)  # each batch's seconds a step, the agreement's own left out
            clock[0] += 1.0
            return not over, batch

        rounds = iter([False, False, True])
        steps = engine._Steps(end, step)  # type: ignore[arg-type]
        per_link, found = steps.shared(functools.partial(next, rounds), agree, 1, batch)
        assert found == pytest.approx(duty) and per_link == [[3.0] * 3 * batch] and end.checked == [0]
        assert seen == [3.0, 3.0, 3.0]
        # ce-armed's arming before every step but the first (the fill did it), outside the steps' time
        assert end.aheads == 3 * batch - 1


def test_the_shared_half_runs_the_batch_the_ranks_agree_on() -> None:
    """Each batch's steps are the fewest any rank asked for from its last batch's seconds a step
    (WINDOW_BATCH_SECONDS a batch), so every rank runs the same steps between agreements."""
    from rdmabench.measure import round as engine

    batches: list[int] = []
    end = _End([0.0])
    answers = iter([(True, 7), (True, 2), (False, 5)])

    def agree(over: bool, step_seconds: float) -> tuple[bool, int]:
        return next(answers)

    def step(end: object, index: int) -> list[float]:
        batches.append(index)
        return [1e-3]

    per_link, _ = engine._Steps(end, step).shared(lambda: False, agree, 1, 3)  # type: ignore[arg-type]
    assert len(per_link[0]) == 3 + 7 + 2


class _Comm:
    """A round of one rank: agree_max answers its own values (no message is sent)."""

    def Get_rank(self) -> int:
        return 0


class _DriftingLoad(StandInLoad):
    """After each shared window its operations alone take `drift` longer (first `takes` windows only)."""

    def __init__(self, drift: float, takes: int):
        super().__init__(step=1, ring=1 << 16)
        self.drift, self.takes = drift, takes

    def set_busy(self, busy: bool) -> None:
        if self.running and self.busy and not busy and self.takes > 0:
            self.takes -= 1
            self.times[0] *= 1 + self.drift
        self.busy = busy


@pytest.mark.parametrize(("takes", "kept_after", "drifting"), [(1, 1, False), (99, 2, True)])
def test_a_drifting_pair_is_taken_again_at_most_retakes_times(takes: int, kept_after: int, drifting: bool) -> None:
    """Alone windows 5% apart: the pair is taken again; it is kept once they agree, or after RETAKES
    more takes, marked as drifting (never silently)."""
    from rdmabench.measure import round as engine
    from rdmabench.measure.beside import RETAKES

    load = _DriftingLoad(0.05, takes)
    end = _End([0.0])
    end.fill = lambda _end, _index: load.set_busy(True)  # type: ignore[method-assign]
    end.check = lambda _end, _index: load.set_busy(False)  # type: ignore[method-assign]
    pairs = Pairs(Beside("gemm", 1024), load, partitioned=False)
    steps = engine._Steps(end, lambda _end, _index: [1e-3])  # type: ignore[arg-type]
    engine._pair(end, _Comm(), steps, pairs, (2, 1, 1))  # type: ignore[arg-type]
    assert RETAKES == 2 and pairs.retakes == kept_after and len(pairs.kept) == 1
    found = pairs.summary()
    assert found["retakes"] == kept_after and found["drifting_pairs"] == ([0] if drifting else [])
    assert found["alone_drift"] == (0.05 if drifting else 0.0)


@pytest.mark.parametrize("spans", [True, False])
def test_only_an_end_whose_steps_span_its_transfers_says_the_duty(spans: bool) -> None:
    """The end that does not initiate a block list waits in its step while the initiator arms
    (ce-armed): its share of the shared half is not the duty, and it says none."""
    from rdmabench.measure import round as engine

    load = _DriftingLoad(0.0, 0)
    end = _End([0.0])
    end.spans = spans
    end.fill = lambda _end, _index: load.set_busy(True)  # type: ignore[method-assign]
    end.check = lambda _end, _index: load.set_busy(False)  # type: ignore[method-assign]
    pairs = Pairs(Beside("gemm", 1024), load, partitioned=False)
    steps = engine._Steps(end, lambda _end, _index: [1e-3])  # type: ignore[arg-type]
    engine._pair(end, _Comm(), steps, pairs, (2, 1, 1))  # type: ignore[arg-type]
    assert (pairs.kept[0].duty is None) == (not spans)


def test_a_pair_below_the_duty_floor_is_kept_but_not_judged() -> None:
    """Pair by pair over two GPUs: the worse slowdown, the higher duty (a transfer is in flight while
    either end is in a step: the posting end's share); a pair below 0.9 is left out of the judged
    figures; the model's time lost per GiB is prorated to the window's share of the half's bytes."""
    from rdmabench.measure.beside import judge_pairs, worse_pairs

    gpus = [
        {"slowdown_pairs": [1.5, 3.0, None], "duty_pairs": [0.95, 0.5, 0.99], "lost_s_pairs": [0.04, 0.2, None],
         "window_s_pairs": [0.12, 0.24, 0.1], "span_s_pairs": [0.15, 0.3, 0.1]},
        {"slowdown_pairs": [1.2, 2.0, 1.1], "duty_pairs": [0.93, 0.6, None], "lost_s_pairs": [0.02, 0.1, 0.01],
         "window_s_pairs": [0.1, 0.2, 0.1], "span_s_pairs": [0.1, 0.2, 0.1]},
    ]  # fmt: skip
    found = judge_pairs(gpus, [1 << 30, 1 << 30, 1 << 29])
    assert found.slowdowns == [1.5, 3.0, 1.1] and found.duties == [0.95, 0.6, 0.99] and found.judged == [0, 2]
    # pair 0: GPU 0 lost 40 ms over 0.8 GiB in its window (50 ms/GiB), GPU 1 20 ms over 1 GiB: the worse;
    # the time lost per GiB is every pair's, judged or not (pair 1: 200 ms over 0.8 GiB)
    assert found.lost_ms_per_gib == [pytest.approx(50.0), pytest.approx(250.0), pytest.approx(20.0)]
    drifting = [dict(gpus[0], drifting_pairs=[2]), gpus[1]]  # a pair still drifting after its retakes
    assert judge_pairs(drifting, [1 << 30, 1 << 30, 1 << 29]).judged == [0]
    assert worse_pairs(gpus) == [1.5, 1.1]


def test_a_load_that_failed_says_why_at_once_not_after_the_stall_limit() -> None:
    """The load's thread ended on a CUDA error: the pair's next wait raises the library's own reason
    right away (the stall limit, a minute, is for a load that stops without one)."""
    import time

    from rdmabench.measure.beside import STALLED_SECONDS, Beside, Pairs

    load = StandInLoad(step=1, ring=100)
    load.error = "waiting for a load operation: an illegal memory access was encountered"
    began = time.perf_counter()
    with pytest.raises(TransportError, match="illegal memory access"):
        Pairs(Beside("gemm", 1024), load, partitioned=False).begin()
    assert time.perf_counter() - began < STALLED_SECONDS / 10


def test_the_worse_gpu_is_taken_pair_by_pair() -> None:
    """Each pair's slowdown is the worse of the GPUs that measured it; a pair no GPU measured is left out."""
    from rdmabench.measure.beside import worse_pairs

    gpus = [{"slowdown_pairs": [1.1, None, None, 0.9]}, {"slowdown_pairs": [1.0, 1.2, None, 1.3]}]  # no duty known
    assert worse_pairs(gpus) == [1.1, 1.2, 1.3]


@pytest.mark.parametrize(("drift", "expected"), [(None, False), (0.03, False), (-0.031, True), (0.2, True)])
def test_a_drift_past_the_limit_either_way_marks_the_pair(drift: float | None, expected: bool) -> None:
    """What rdmabench's pairs and the NIXL anchor's both mark as drifting (and leave unjudged)."""
    from rdmabench.measure.beside import DRIFT_LIMIT, drifting

    assert DRIFT_LIMIT == 0.03 and drifting(drift) is expected


def test_a_fast_load_keeps_its_whole_pair_in_what_the_library_keeps() -> None:
    """A load of a few microseconds an operation (decode:1MiB) finishes more operations in a pair's
    0.4 + 0.08 + 0.08 + 0.15 + 0.08 s than the library keeps (RING): each part of the pair is held to a
    fifth of it, so the window before, the shared window and the window after all stay."""
    from rdmabench.measure.beside import RING, SEGMENT_OPERATIONS

    load = StandInLoad(step=2000, ring=RING, alone=4e-6, beside=8e-6)  # 2,000 operations a poll
    pairs = Pairs(Beside("gemm", 1024), load, partitioned=False)
    pairs.settle()
    assert pairs.operations == SEGMENT_OPERATIONS
    _one_pair(pairs, load, 1.0)
    found = pairs.summary()
    assert found["slowdown_pairs"] == [2.0] and found["alone_drift"] == 0.0


@pytest.mark.parametrize("operation", ["put", "get"])
def test_only_the_active_end_of_a_one_sided_round_says_the_duty(operation: str) -> None:
    """The end that owns the memory waits in its step from READY to DONE, across the active end's gaps
    between steps: a put's sender and a get's receiver say the duty, the other end does not."""
    from types import SimpleNamespace

    from rdmabench.measure.onesided import OneSidedProtocol
    from rdmabench.wire.native import RMA_GET, RMA_PUT

    protocol = OneSidedProtocol(RMA_PUT if operation == "put" else RMA_GET)
    sender, receiver = SimpleNamespace(targets=["link"], sources=[]), SimpleNamespace(targets=[], sources=["link"])
    said = [protocol.spans_transfers(end) for end in (sender, receiver)]  # type: ignore[arg-type]
    assert said == ([True, False] if operation == "put" else [False, True])
