"""KV offload in the engine (--test swap-out, swap-in: measure/offloadsteps.py): a block list between a
rank's GPU pool and its own pinned pool, in the one process that owns both.

Where no GPU is: the CPU's path runs end to end through real ranks (host memory at both ends, every
block checked), its record says the link is the rank with itself, `report` reads it back; every
refusal is one line; the pace sweep's bookkeeping (one list a pace, the pace and its threads in the
record). On the GPU machine (`-m gpu`): every path both ways, every byte checked, and the kernel
beside a carved GEMM.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from rdmabench.errors import ConfigError
from rdmabench.hardware.gpu import visible_gpu_count
from rdmabench.job.config import RunConfig
from rdmabench.measure.blockrecord import BlockList, BlockSteps
from rdmabench.measure.blocks import BlockShape
from rdmabench.measure.offloadsteps import pool_problems
from rdmabench.measure.postings import POSTINGS, parse_postings, pool_paths
from rdmabench.modes import MemoryMode
from rdmabench.results.files.document import load as load_results
from rdmabench.results.files.entries import posting_of, records_of, settings_of
from rdmabench.results.files.row import Row
from rdmabench.results.files.rowgroups import BesideCompute, BesideRun, ListFigures
from rdmabench.results.reports.paces import pace_lines

from .conftest import QUICK, rdmabench_env, refused_in_one_line, run_cli


def _run(path: Path, *args: str) -> list[dict[str, Any]]:
    proc = run_cli(["run", "--np", "2", "-o", str(path), *QUICK, *args], env=rdmabench_env(), timeout=300)
    assert proc.returncode == 0, proc.stderr
    return load_results(str(path))["results"]  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    ("test", "src", "dst"), [("swap-out", "pageable", "pinned"), ("swap-in", "pinned", "pageable")]
)
def test_the_cpu_path_offloads_every_block_checked_and_says_the_link_is_the_rank_itself(
    results_path: Path, test: str, src: str, dst: str
) -> None:
    args = ["--test", test, "--blocks", "32", "--layout", "random", "--block-size", "4KiB", "--posting", "cpu"]
    reference, blocks = _run(results_path, *args, "--src-mode", src, "--dst-mode", dst)
    assert reference["size_bytes"] == 32 * 4096 and reference["blocks"]["count"] == 1
    for entry in (reference, blocks):
        # Rank 0 with itself, its two pools of the modes asked, and the record that says so.
        assert (entry["src_rank"], entry["dst_rank"], entry["src_mode"], entry["dst_mode"]) == (0, 0, src, dst)
        assert entry["blocks"]["offload"] == test.removeprefix("swap-")
        assert entry["validated"] and entry["wrong_bytes"] == 0
        assert entry["ucx_locality"] == "this process" and not entry.get("warnings")
    record = blocks["blocks"]
    assert (record["count"], record["layout"], record["posted_by"], record["operation"]) == (32, "random", "cpu", test)
    assert record["path"] == "the CPU copies each block (host memory at both ends)"
    assert record["transfers"] == blocks["iterations"] * len(blocks["samples"]) and record["post_us_p50"] > 0
    assert record["share_of_contiguous"] == pytest.approx(blocks["bandwidth_gbps"] / reference["bandwidth_gbps"], 1e-4)
    proc = run_cli(["report", str(results_path)])
    assert proc.returncode == 0, proc.stderr
    assert f"test: {test}; modes: {src}->{dst}" in proc.stdout and "rank0 -> " in proc.stdout


def test_every_rank_offloads_at_once_with_each_ranks_figure_and_the_hosts_total(results_path: Path) -> None:
    args = ["--test", "swap-in", "--pattern", "each", "--blocks", "16", "--block-size", "4KiB", "--posting", "cpu"]
    entries = _run(results_path, *args, "--src-mode", "pinned", "--dst-mode", "pageable")
    lists = [entry for entry in entries if entry["blocks"]["count"] == 16]
    assert sorted((entry["src_rank"], entry["dst_rank"]) for entry in lists) == [(0, 0), (1, 1)]
    for entry in lists:
        assert entry["blocks"]["offload"] == "in" and entry["validated"] and entry["wrong_bytes"] == 0
        assert entry["concurrent_links"] == 2 and entry["pattern_aggregate_gbps"] > 0


def test_one_rank_offloads_alone_with_pattern_each(results_path: Path) -> None:
    args = ["run", "--np", "1", "-o", str(results_path), *QUICK, "--test", "swap-out", "--pattern", "each"]
    args += [
        "--blocks",
        "8",
        "--block-size",
        "4KiB",
        "--posting",
        "cpu",
        "--src-mode",
        "pageable",
        "--dst-mode",
        "pinned",
    ]
    proc = run_cli(args, env=rdmabench_env())
    assert proc.returncode == 0, proc.stderr
    lists = [entry for entry in load_results(str(results_path))["results"] if entry["blocks"]["count"] == 8]
    assert [(entry["src_rank"], entry["dst_rank"], entry["wrong_bytes"]) for entry in lists] == [(0, 0, 0)]
    refused = run_cli(["run", "--np", "1", "--test", "swap-out", "--blocks", "8", "-o", str(results_path) + ".x"])
    assert refused.returncode == 2 and "--np must be at least 2" in refused.stderr  # pair: two ranks


def test_a_corrupted_block_of_an_offload_is_caught(results_path: Path) -> None:
    args = ["run", "--np", "2", "-o", str(results_path), *QUICK, "--test", "swap-out", "--blocks", "8"]
    args += ["--src-mode", "pageable", "--dst-mode", "pinned", "--posting", "cpu", "--block-size", "4KiB"]
    proc = run_cli(args, env=rdmabench_env(RDMABENCH_FAULT="corrupt:1"))
    assert proc.returncode != 0 and "wrong byte" in proc.stderr and "swap-out" in proc.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--mode", "device"], "not device to device: --src-mode device --dst-mode pinned"),
        (["--src-mode", "pinned", "--dst-mode", "device"], "moves the other way: --src-mode device --dst-mode pinned"),
        (["--mode", "pinned", "--posting", "kernel"], "--posting kernel moves a list between the rank's GPU"),
        (["--mode", "pinned", "--posting", "ce-armed"], "--posting ce-armed moves a list between the rank's GPU"),
        (["--posting", "cpu"], "with the GPU at one end, its request per block is direct"),
        (["--src-mode", "device", "--dst-mode", "pageable"], "host pool is pinned memory the GPU maps"),
        (["--posting", "gpu"], "--posting gpu does not apply to an offload to this rank's own pinned pool"),
        (["--posting", "nope"], "unknown --posting 'nope': choose ce-batch, ce-armed, cpu, kernel, direct, all"),
        (["--batch", "2"], "moves one list a step: leave out --batch"),
        (["--src-mode", "managed", "--dst-mode", "pinned"], "cannot use managed memory: an offload's ends are"),
        (["--src-mode", "device", "--dst-mode", "ucx"], "cannot use ucx memory"),
        (["--block-size", "4104"], "--posting kernel moves 16-byte words: --block-size 4104 is not a multiple of 16"),
        (["--posting", "direct", "--pace", "8x1x128"], "--pace sets the offload kernel's pace"),
        (["--pace", "8x1"], "a pace is SMSxCTASxTHREADS"),
        (["--pace", "8x1x100"], "threads a CTA are a multiple of 32"),
        (["--mode", "pinned", "--posting", "cpu", "--beside", "gemm"], "--beside runs a model's compute"),
    ],
)
def test_an_offload_that_cannot_run_is_refused_in_one_line(tmp_path: Path, args: list[str], message: str) -> None:
    refused_in_one_line(tmp_path, ["--test", "swap-out", "--blocks", "16", *args], message)


def test_offload_settings_elsewhere_are_refused_in_one_line(tmp_path: Path) -> None:
    refused_in_one_line(
        tmp_path, ["--test", "swap-out", "--blocks", "4", "--pattern", "ring"], "--pattern pair (rank 0) or each"
    )
    refused_in_one_line(tmp_path, ["--test", "put", "--pattern", "each"], "--pattern each runs every rank with itself")
    refused_in_one_line(tmp_path, ["--test", "swap-in"], "--test swap-in moves a block list: give --blocks N")
    refused_in_one_line(
        tmp_path, ["--test", "put", "--blocks", "4", "--posting", "kernel"], "--posting kernel does not apply to a list"
    )
    refused_in_one_line(tmp_path, ["--test", "put", "--pace", "8x1x128"], "--pace sets the offload kernel's pace")


def test_without_a_gpu_the_gpu_paths_are_refused_in_one_line(tmp_path: Path) -> None:
    if visible_gpu_count() > 0:
        pytest.skip("a GPU is here")
    refused_in_one_line(tmp_path, ["--test", "swap-out", "--blocks", "16"], "device memory needs a GPU", process=True)


def _config(*args: str) -> RunConfig:
    options: dict[str, Any] = {"test": "swap-out", "blocks": 64, "block_size": [4096]}
    pairs = dict(zip(args[::2], args[1::2], strict=True))
    options.update({key.removeprefix("--").replace("-", "_"): value for key, value in pairs.items()})
    for end in ("src_mode", "dst_mode"):
        if end in options:
            options[end] = MemoryMode.parse(options[end])
    return RunConfig.from_options(options)


def test_a_pace_sweep_is_one_list_a_pace_in_order_and_each_path_once() -> None:
    config = _config("--posting", "all", "--pace", "4x1x32,8x1x128,4x1x32,16x1x64")
    assert config.modes == (MemoryMode.DEVICE, MemoryMode.PINNED)  # an offload's ends where none is given
    shapes = [(shape.posting.name, shape.pace) for shape in config.shape.lists]
    assert shapes == [
        ("ce-batch", None), ("ce-armed", None), ("kernel", "4x1x32"), ("kernel", "8x1x128"), ("kernel", "16x1x64"),
        ("direct", None),
    ]  # fmt: skip
    assert [shape.pace for shape in _config().shape.lists] == [None]  # auto: the kernel at its default pace
    assert [shape.posting.name for shape in _config("--posting", "auto").shape.lists] == ["kernel"]
    host = _config("--src-mode", "pageable", "--dst-mode", "pinned", "--posting", "all")
    assert [shape.posting.name for shape in host.shape.lists] == ["cpu"]  # host memory at both ends: the CPU's only
    again = RunConfig.from_json(config.to_json())  # what each rank reads: the same lists
    assert [(s.posting.name, s.pace) for s in again.shape.lists] == shapes
    assert config.summary()["pace"] == "4x1x32,8x1x128,4x1x32,16x1x64" and "pace" not in _config().summary()


def test_the_record_keeps_the_pace_and_its_threads_in_flight() -> None:
    shape = BlockShape(16, posting=POSTINGS["kernel"], pace="8x2x128")
    steps = BlockSteps(shape, "swap-out", [1e-4, 2e-4], [1e-6, 1e-6], {}, "kernel words", "kernel", offload="out")
    record = BlockSteps(**{**steps.__dict__, "pace": "8x2x128"}).figure(4096)
    assert record is not None and (record.offload, record.pace, record.pace_threads) == ("out", "8x2x128", 2048)
    assert {"offload", "pace", "pace_threads"} <= set(record.to_json())
    plain = steps.figure(4096)
    assert plain is not None and plain.pace is None and "pace_threads" not in plain.to_json()


def test_without_a_gpu_each_gpu_path_to_a_pool_says_why_in_one_line() -> None:
    """Every rank asks this before a run (job/lists.py): each path's record, the copy engines' too (a
    record with mappings in it, no key of a dict: the first GPU run failed on it)."""
    if visible_gpu_count() > 0:
        pytest.skip("a GPU is here")
    found = pool_problems((*pool_paths(), POSTINGS["kernel"]))
    assert sorted(found) == ["ce-armed", "ce-batch", "direct", "kernel"]  # the CPU's path runs anywhere
    assert all("no GPU" in why and "\n" not in why for why in found.values())


def test_the_registry_says_which_paths_apply_to_a_pool() -> None:
    assert [path.name for path in pool_paths()] == ["ce-batch", "ce-armed", "cpu", "kernel", "direct"]
    assert [path.name for path in parse_postings("all")] == ["gpu", "ce-batch", "ce-armed", "cpu"]  # to a peer
    with pytest.raises(ConfigError, match="--posting direct does not apply to a list to another rank"):
        parse_postings("direct")


needs_gpu = pytest.mark.skipif(visible_gpu_count() < 1, reason="needs a GPU")


@pytest.mark.gpu
@needs_gpu
@pytest.mark.parametrize("test", ["swap-out", "swap-in"])
def test_every_gpu_path_offloads_every_byte_checked(results_path: Path, test: str) -> None:
    """Every path to the pool both ways (the kernel at two paces), random blocks of two sizes: every
    byte checked each step, who posted it and at which pace in the record, read against its reference."""
    args = ["--test", test, "--blocks", "256", "--layout", "random", "--block-size", "4KiB,64KiB"]
    entries = _run(results_path, *args, "--posting", "all", "--pace", "2x1x32,8x1x128")
    lists = [entry for entry in entries if entry["blocks"]["count"] == 256]
    found = {(entry["blocks"]["posted_by"], entry["blocks"].get("pace")) for entry in lists}
    paths = {("ce-batch", None), ("ce-armed", None), ("kernel", "2x1x32"), ("kernel", "8x1x128"), ("direct", None)}
    assert found == paths and len(lists) == 2 * len(paths)
    for entry in entries:
        record = entry["blocks"]
        assert entry["validated"] and entry["wrong_bytes"] == 0 and entry["bandwidth_gbps"] > 0
        assert (entry["src_rank"], entry["dst_rank"], record["offload"]) == (0, 0, test.removeprefix("swap-"))
    for entry in lists:
        record = entry["blocks"]
        assert record["ceiling_gbps"] > 0  # the kernel at a full pace over the same list
        assert record["share_of_contiguous"] > 0 and record["contiguous_posted_by"] == "ce-batch"
        if record["posted_by"] == "kernel":
            assert record["pace_threads"] in (64, 1024) and record["sms"]["mode"] == "pace"
        if record["posted_by"] == "ce-armed":
            assert record["arm_us"] > 0 and record["cpu_us_per_descriptor"] > 0


@pytest.mark.gpu
@needs_gpu
def test_the_kernel_offloads_beside_a_carved_gemm_and_the_model_cost_is_recorded(results_path: Path) -> None:
    args = ["--test", "swap-out", "--blocks", "256", "--layout", "random", "--block-size", "4KiB"]
    entries = _run(results_path, *args, "--posting", "kernel", "--pace", "8x1x32", "--beside", "gemm:2048,carveout=8")
    (entry,) = [entry for entry in entries if entry["blocks"]["count"] == 256]
    assert entry["validated"] and entry["wrong_bytes"] == 0
    assert entry["blocks"]["sms"] == {"mode": "carveout", "transfer": 8, "ctas": 8}
    beside = entry["beside"]
    assert "carveout=8" in str(beside["load"]) and beside["transfer_alone"] > 0


def _row(pace: str, gbps: float, slowdown: float | None) -> Row:
    """A generated row (made up figures, the report layer only): rank 0's swap-out at 4 KiB by the kernel."""
    path, load = f"kernel at {pace}", "beside gemm:8192"
    row = Row("swap-out", "device", "pinned", 4096, "vm:rank0 -> vm:rank0", "intra-node", "vm", "vm", "GB/s", load)
    row.values, row.lists = [gbps], ListFigures(path, block_list="1024 x random, 1 in flight")
    row.compute = BesideCompute("gemm", 8192, 0, path, [BesideRun(50.0, slowdown)] if slowdown is not None else [])
    return row


def test_a_faster_pace_that_cost_the_model_more_than_it_gained_is_said() -> None:
    rows = [_row("4x1x128", 48.9, 1.086), _row("2x1x128", 27.5, 1.003), _row("12x1x32", 48.2, 1.030)]
    rows += [_row("8x1x128", 49.0, 1.75), _row("16x2x128", 50.0, None)]  # the last: no judged slowdown
    first, second = pace_lines(rows)  # 12 warps bought +75% for +2.7%: no line
    assert first.startswith("swap-out 4KiB (1024 x random, 1 in flight): pace 4x1x128 moved +1.5% against 12x1x32")
    assert "cost the model +5.4% (x1.086 against x1.030): it cost more than it gained" in first
    assert "pace 8x1x128 moved +0.2% against 4x1x128" in second and "+61.1%" in second
    assert pace_lines(rows[1:3]) == []


def test_each_pace_is_a_row_and_a_candidate_of_its_own() -> None:
    blocks = {"count": 1024, "layout": "random", "batch": 1, "posted_by": "kernel", "pace": "2x1x128"}
    entry: dict[str, Any] = {"blocks": blocks, "engine": "native", "validated": True, "window": 1024}
    other = {**entry, "blocks": {**blocks, "pace": "4x1x128"}}
    assert posting_of(BlockList.from_json(entry["blocks"])) == ("kernel at 2x1x128", None, False)
    assert settings_of(entry, {}, records_of(blocks, None)) != settings_of(other, {}, records_of(other["blocks"], None))
    assert posting_of(BlockList.from_json({**blocks, "pace": None}))[0] == "kernel"
