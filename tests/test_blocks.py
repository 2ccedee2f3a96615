"""Block lists shaped like KV caches (--blocks): real ranks, real UCX puts, gets and tagged messages
between slots of real pools, every block validated, every transfer timed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from rdmabench.errors import ConfigError
from rdmabench.measure.blockrecord import BlockList
from rdmabench.measure.blocks import BlockShape
from rdmabench.measure.postings import POSTINGS
from rdmabench.memory.buffers import allocate
from rdmabench.memory.payload import BlockPayload, block_keys
from rdmabench.modes import MemoryMode
from rdmabench.results.files.document import load as load_results
from rdmabench.wire import native

from .conftest import QUICK, rdmabench_env, refused_in_one_line, run_cli

needs_native = pytest.mark.skipif(native.load().library is None, reason=f"no native loop: {native.load().reason}")


def _run(path: Path, *args: str, **env: str) -> list[dict[str, Any]]:
    proc = run_cli(["run", "--np", "2", "-o", str(path), *QUICK, *args], env=rdmabench_env(**env))
    assert proc.returncode == 0, proc.stderr
    return load_results(str(path))["results"]  # type: ignore[no-any-return]


@needs_native
@pytest.mark.parametrize(
    "test, layout", [("put", "contiguous"), ("put", "strided"), ("put", "random"), ("get", "random"), ("bw", "random")]
)
def test_block_lists_in_every_layout_are_checked_and_timed_per_transfer(
    results_path: Path, test: str, layout: str
) -> None:
    args = ["--test", test, "--blocks", "16", "--block-size", "4KiB", "--layout", layout, "--batch", "2"]
    reference, blocks = _run(results_path, *args)
    # First the same bytes as one contiguous message per transfer, then the blocks themselves.
    assert reference["size_bytes"] == 16 * 4096 and reference["blocks"]["count"] == 1
    assert blocks["size_bytes"] == 4096 and blocks["validated"] and blocks["wrong_bytes"] == 0
    record = blocks["blocks"]
    assert (record["count"], record["layout"], record["batch"], record["transfer_bytes"]) == (16, layout, 2, 65536)
    assert record["pool_bytes"] == {"contiguous": 32, "strided": 64, "random": 128}[layout] * 4096
    assert record["transfers"] == 2 * blocks["iterations"] * len(blocks["samples"])  # every timed transfer
    us = record["transfer_us"]
    assert 0 < us["p50"] <= us["p99"] <= us["p99.9"] <= us["max"]
    assert 0 < record["post_us_p50"] and 0 < record["completion_us_p50"]
    assert record["contiguous_gbps"] == pytest.approx(reference["bandwidth_gbps"], rel=1e-5)
    assert record["share_of_contiguous"] == pytest.approx(
        blocks["bandwidth_gbps"] / reference["bandwidth_gbps"], rel=1e-4
    )
    assert blocks["transport"] and blocks["messages_per_sample"] == blocks["iterations"] * 32
    # Host memory: the CPU posts (the GPU's path and its ceiling are for device memory), and says nothing more.
    assert record["posted_by"] == "cpu" and record["path"].startswith(("host-posted", "tagged"))
    assert "ceiling_gbps" not in record and "path_note" not in record


@needs_native
@pytest.mark.parametrize("test", ["put", "bw"])
def test_a_corrupted_block_is_caught(results_path: Path, test: str) -> None:
    args = ["--test", test, "--blocks", "8", "--block-size", "1KiB", "--layout", "random", "--warmup", "1"]
    proc = run_cli(
        ["run", "--np", "2", "-o", str(results_path), *QUICK, *args], env=rdmabench_env(RDMABENCH_FAULT="corrupt:1")
    )
    assert proc.returncode != 0
    # The fault fires in the first round: the contiguous reference (the 8 blocks' bytes as one).
    assert "wrong byte(s) of 8192 in block 0 of transfer 0 of step 1 from rank 0" in proc.stderr, proc.stderr


def test_the_block_checker_names_the_corrupted_block_of_a_random_layout() -> None:
    shape = BlockShape(8, "random", batch=2).check()
    pool = allocate(MemoryMode.PAGEABLE, shape.pool_slots(1024) * 1024, have_gpu=False)
    sender = BlockPayload(pool, 1024, shape.slots("src", 1024), 0)
    keys = block_keys(np, 3, shape.per_step, 1)
    sender.fill(keys)
    assert sender.wrong(keys) == (-1, 0)
    slot = int(shape.slots("src", 1024)[11])  # block 3 of transfer 1
    pool.array[slot * 1024 + 100 : slot * 1024 + 103] ^= 0xFF
    assert sender.wrong(keys) == (11, 3)
    assert sender.wrong(block_keys(np, 4, shape.per_step, 1))[0] == 0  # another step's keys: stale data


# A fixed count of steps (4 x 12), not a time: a loaded machine that calibrated fewer steps per sample
# would leave too few transfers for one in ten to reach the tail (CI once measured 32).
_SLOW = ["--test", "put", "--blocks", "16", "--block-size", "4KiB", "--samples", "4", "--iters", "12"]


@needs_native
def test_a_planted_slow_transfer_reaches_the_tail(tmp_path: Path) -> None:
    blocks = _run(tmp_path / "slow.json", *_SLOW, RDMABENCH_FAULT="slow:10")[1]["blocks"]
    assert blocks["transfers"] >= 40, blocks  # enough transfers that one in ten is past the 99th percentile
    assert blocks["transfer_us"]["p99"] >= 5000, blocks["transfer_us"]  # the planted 5 ms, at least


@needs_native
@pytest.mark.perf
def test_a_planted_slow_transfer_leaves_the_median_alone(tmp_path: Path) -> None:
    """The other transfers stay well under the planted 5 ms: an absolute time, so on a quiet machine."""
    us = _run(tmp_path / "slow.json", *_SLOW, RDMABENCH_FAULT="slow:10")[1]["blocks"]["transfer_us"]
    assert us["p99"] >= 5000 and us["p50"] < 2500, us


def test_block_shapes() -> None:
    random = BlockShape(64, "random", batch=2).check()
    src, dst = random.slots("src", 4096), random.slots("dst", 4096)
    assert len(set(src.tolist())) == 128 and src.max() < random.pool_slots(4096) == 512
    assert not np.array_equal(src, dst) and np.array_equal(src, random.slots("src", 4096))  # seeded
    assert BlockShape(4, "strided").slots("src", 8).tolist() == [0, 2, 4, 6]
    assert BlockShape(8, "contiguous", 3).contiguous(4096) == (BlockShape(1, "contiguous", 3), 8 * 4096)
    # The reference is posted as its list is (--posting cpu: a contiguous message the CPU posts too).
    cpu = POSTINGS["cpu"]
    assert BlockShape(8, "random", posting=cpu).contiguous(4096)[0].posting == cpu
    with pytest.raises(ConfigError, match="needs 8 slots"):
        BlockShape(4, "strided", pool_bytes=7 * 4096).check().check_fits(4096)


@pytest.mark.parametrize(
    "args, message",
    [
        (["--blocks", "0"], "--blocks must be at least 1, not 0"),
        (["--blocks", "4", "--block-size", "1MiB", "--pool", "64KiB"], "is larger than the --pool"),
        (["--blocks", "4", "--block-size", "4KiB", "--layout", "strided", "--pool", "28KiB"], "needs 8 slots"),
        (["--blocks", "4", "--layout", "diagonal"], "unknown --layout 'diagonal'"),
        (["--blocks", "4", "--block-size", "1004"], "multiple of 8 bytes"),
        (["--blocks", "4", "--test", "lat"], "--blocks moves the bytes of put, get or bw"),
        (["--blocks", "4", "--pattern", "ring"], "--blocks measures one link at a time"),
        (["--blocks", "4", "--mode", "staged"], "--blocks cannot use staged memory"),
        (["--blocks", "4", "--test", "get", "--mode", "bounce"], "--test get cannot use bounce memory"),
        (["--block-size", "4KiB"], "give --blocks as well"),
        (["--layout", "random"], "give --blocks N as well"),
        (["--blocks", "4", "--batch", "0"], "--batch must be at least 1"),
        (["--blocks", "4", "--posting", "fpga"], "unknown --posting 'fpga'"),
        (["--blocks", "4", "--posting", ","], "--posting ',' leaves a name empty"),  # never auto in its place
        (["--blocks", "4", "--posting", "cpu,"], "--posting 'cpu,' leaves a name empty"),
        (["--blocks", "4", "--posting", ""], "--posting '' leaves a name empty"),
        (["--posting", "cpu"], "give --blocks N as well"),
        (["--no-merge"], "--no-merge shape block lists: give --blocks N as well"),
        (["--blocks", "4", "--layout", "runs:0"], "--layout runs:MEAN takes a mean run length of at least 1"),
        (["--blocks", "64", "--block-size", "1KiB", "--layout", "runs:4", "--pool", "64KiB"], "--layout runs:4 of 64"),
        (["--blocks", "4", "--test", "put", "--posting", "gpu"], "--posting gpu posts puts and gets of device memory"),
        (["--blocks", "4", "--test", "bw", "--mode", "device", "--posting", "gpu"], "--posting gpu posts puts"),
    ],
)
def test_bad_block_options_are_one_line(tmp_path: Path, args: list[str], message: str) -> None:
    refused_in_one_line(tmp_path, args, message)


def test_a_list_the_gpu_posted_is_never_merged_with_one_the_cpu_posted() -> None:
    from rdmabench.results.files.rows import settings_of

    blocks = {"count": 1024, "layout": "random", "batch": 1}
    by_cpu = settings_of({"blocks": {**blocks, "posted_by": "cpu"}}, {})
    by_gpu = settings_of({"blocks": {**blocks, "posted_by": "gpu"}}, {})
    assert by_cpu != by_gpu and "posted by the GPU" in dict(by_gpu)["blocks"]
    assert by_cpu == settings_of({"blocks": blocks}, {})  # files from before --posting: the CPU posted


def _runs_of(slots: np.ndarray) -> list[int]:
    """Lengths of the runs of adjacent slots, in list order."""
    breaks = np.flatnonzero(np.diff(slots) != 1) + 1
    return np.diff(np.concatenate(([0], breaks, [len(slots)]))).tolist()  # type: ignore[no-any-return]


def test_runs_are_adjacent_slots_of_the_mean_length_that_never_touch() -> None:
    shape = BlockShape(4096, "runs:4").check()
    src, dst = shape.slots("src", 4096), shape.slots("dst", 4096)
    assert len(set(src.tolist())) == 4096 and 0 <= src.min() and src.max() < shape.pool_slots(4096) == 4 * 4096
    runs = _runs_of(src)
    assert 3.6 < 4096 / len(runs) < 4.4 and min(runs) >= 1  # geometric, mean 4
    # Placed without touching: sorted, the pool holds exactly as many runs as the list has.
    assert len(_runs_of(np.sort(src))) == len(runs)
    assert runs != sorted(runs) or len(set(runs)) == 1  # in an allocator's order, not the pool's
    assert not np.array_equal(src, dst) and np.array_equal(src, shape.slots("src", 4096))  # drawn per end, seeded
    assert _runs_of(BlockShape(512, "runs:1").check().slots("src", 8)) == [1] * 512


@pytest.mark.parametrize(
    "layout, message",
    [
        ("runs:0.5", "at least 1"),
        ("runs:x", "at least 1"),
        ("runs", "unknown --layout 'runs'"),
        ("random:2", "unknown"),
    ],
)
def test_a_bad_runs_layout_is_named(layout: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        BlockShape(8, layout).check()


def test_blocks_merge_only_where_adjacent_at_both_ends_in_one_transfer_and_region() -> None:
    block = 8
    local = np.array([0, 1, 2, 5, 6, 7, 8, 9]) * block
    remote = np.array([3, 4, 9, 10, 11, 12, 13, 14]) * block
    first, mine, theirs, lengths = BlockShape(8).descriptors(local, remote, block)
    # 0-1 with 3-4; 2 (remote 9 follows 4 by 5); 5-9 with 10-14
    assert (
        first.tolist() == [0, 3] and (mine // block).tolist() == [0, 2, 5] and (theirs // block).tolist() == [3, 9, 10]
    )
    assert (lengths // block).tolist() == [2, 1, 5]
    # Two transfers of 4 (a transfer's requests are its own), or two regions of 4: 5 | 6-9.
    assert BlockShape(4, batch=2).descriptors(local, remote, block)[0].tolist() == [0, 3, 4]
    assert BlockShape(8, regions=2).descriptors(local, remote, block)[3].tolist() == [16, 8, 8, 32]
    unmerged = BlockShape(8, merge=False).descriptors(local, remote, block)
    assert unmerged[0].tolist() == [0, 8] and unmerged[3].tolist() == [block] * 8


@needs_native
@pytest.mark.parametrize("test, merge", [("put", "--merge"), ("bw", "--merge"), ("get", "--no-merge")])
def test_the_cpu_posts_the_merged_list_and_says_how_many(tmp_path: Path, test: str, merge: str) -> None:
    args = ["--test", test, "--blocks", "64", "--block-size", "1KiB", "--layout", "runs:4", merge]
    entry = _run(tmp_path / "r.json", *args)[1]
    assert entry["validated"] and entry["wrong_bytes"] == 0  # every block checked where it landed
    record = entry["blocks"]
    shape = BlockShape(64, "runs:4", merge=merge == "--merge").check()
    src, dst = shape.slots("src", 1024) * 1024, shape.slots("dst", 1024) * 1024
    expected = int(shape.descriptors(src, dst, 1024)[0][-1])
    assert record["posted_descriptors"] == expected and record["merged"] is (merge == "--merge")
    assert (expected < 64) if merge == "--merge" else (expected == 64)


def test_a_shape_gives_its_protocols_and_a_list_its_contiguous_references_as_companions() -> None:
    """The run's shape is resolved once; the test kind gives a protocol a posting path; a device list's
    companions are the GPU's paths every rank can run (else the CPU), another list's posted as the list;
    an entry reads against the fastest of its link's (generated figures: no ranks)."""
    from types import SimpleNamespace

    from rdmabench.job.config import RunConfig

    assert RunConfig.from_options({"test": "bw"}).shape.form == "message"
    config = RunConfig.from_options({"test": "put", "blocks": 4, "posting": "all", "mode": MemoryMode.DEVICE})
    shape = config.shape
    assert shape is config.shape and shape.form == "block list" and shape.device
    steps = config.kind.protocols(shape)
    assert [step.shape.posting.name for step in steps] == ["gpu", "ce-batch", "ce-armed", "cpu"]  # type: ignore[attr-defined]
    only_cpu = config.kind.protocols(shape, (POSTINGS["cpu"],))
    assert [step.shape.posting.name for step in only_cpu] == ["cpu"]  # type: ignore[attr-defined]
    posted = [
        [(found.protocol.shape.posting.name, found.size) for found in steps[0].companions(4096, refused)]  # type: ignore[attr-defined]
        for refused in ((), ("gpu",), ("gpu", "ce-batch"))
    ]
    assert posted == [[("gpu", 16384), ("ce-batch", 16384)], [("ce-batch", 16384)], [("cpu", 16384)]]
    host = RunConfig.from_options({"test": "get", "blocks": 4, "posting": "cpu"})
    (step,) = host.kind.protocols(host.shape)
    assert [found.protocol.shape.posting.name for found in step.companions(4096, ())] == ["cpu"]  # type: ignore[attr-defined]

    def entry(count: int, value: float, posted_by: str = "cpu") -> Any:
        layout = "contiguous" if count == 1 else "random"
        blocks = {"count": count, "block_bytes": 4096, "layout": layout, "posted_by": posted_by}
        return SimpleNamespace(size_bytes=4096, value=value, step=BlockList.from_json(blocks))

    references = {"contiguous": [entry(1, 30.0, "gpu"), entry(1, 40.0, "ce-batch")]}
    listed = entry(4, 10.0)
    steps[0].relate(listed, references)
    assert (listed.step.contiguous_gbps, listed.step.contiguous_posted_by) == (40.0, "ce-batch")
    assert listed.step.to_json()["share_of_contiguous"] == 0.25
    reference = entry(1, 30.0)
    steps[0].relate(reference, references)  # a contiguous message is no list to read against one
    assert "contiguous_gbps" not in reference.step.to_json()
    assert RunConfig.from_options({"test": "bw", "model": "llama-3.1-8b", "prompt": 64}).shape.form == "handoff"
