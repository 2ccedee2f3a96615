"""Streaming steps: a step keeps `--window` messages in flight through `--passes` passes of its
buffers (each message posted as soon as the one before it in its buffer completed), with one
handshake a step; a ping-pong step makes `--passes` round trips. Real ranks, real UCX."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from rdmabench.measure.plan import DEVICE, HOST, MAX_PASSES, MIXED, STREAM_ROUND_TRIPS, default_passes
from rdmabench.results.files.compact import links_path
from rdmabench.results.files.document import load as load_results

from .conftest import rdmabench_env, run_cli, run_cli_here


def test_default_passes_stream_about_a_step_of_bytes_and_stay_bounded() -> None:
    assert default_passes(True, 8, 64, HOST) == MAX_PASSES  # small messages: as many passes as allowed
    assert default_passes(True, 1 << 20, 8, MIXED) == 8  # 8 MiB a window: 64 MiB a step
    assert default_passes(True, 64 << 20, 1, HOST) == 1  # a window already past the step budget
    assert default_passes(True, 256 << 20, 2, DEVICE) == 8  # GPU memory: 4 GiB a step
    assert default_passes(False, 8, 1, HOST) == STREAM_ROUND_TRIPS
    assert default_passes(False, 64 << 20, 1, HOST) == 1


def test_the_default_window_fits_a_cache_host_to_host_and_goes_deeper_with_a_gpu() -> None:
    from rdmabench.job.config import Memory, RunConfig
    from rdmabench.measure.plan import default_window
    from rdmabench.modes import MemoryMode as M

    assert [default_window(size, HOST) for size in (4096, 65536, 256 << 10, 1 << 20)] == [64, 4, 1, 1]
    assert [default_window(size, MIXED) for size in (65536, 1 << 20)] == [64, 8]
    assert default_window(1 << 20, DEVICE) == 64
    classes = {
        (M.PAGEABLE, M.PINNED): HOST, (M.MAPPED, M.PAGEABLE): HOST, (M.DEVICE, M.DEVICE): DEVICE,
        (M.DEVICE, M.PINNED): MIXED, (M.STAGED, M.DEVICE): MIXED, (M.MANAGED, M.MANAGED): MIXED,
    }  # fmt: skip
    for (src, dst), memory in classes.items():
        assert RunConfig(memory=Memory(src, dst)).memory_class == memory, (src, dst)


def test_host_memory_between_hosts_gets_the_window_of_a_dma_engine() -> None:
    from rdmabench.job.config import RunConfig
    from rdmabench.job.rounds import size_plan
    from rdmabench.measure import registry

    config, bw = RunConfig(), registry.get("bw")
    assert size_plan(config, bw.protocol, 64 << 10).window == 4  # one host: the window fits a core's cache
    assert size_plan(config, bw.protocol, 64 << 10, spans_hosts=True).window == 64  # a NIC copies: 8 MiB budget


@pytest.fixture(scope="module")
def streamed(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Path]:
    """A run per engine of three buffers and seven passes (4 KiB eager, 64 KiB rendezvous), made once:
    the streaming test's, and (native) the source of the file from before streaming."""
    made: dict[str, Path] = {}

    def run(engine: str) -> Path:
        if engine not in made:
            out = tmp_path_factory.mktemp(engine) / "r.json"
            args = ["run", "--np", "2", "--sizes", "4KiB,64KiB", "--window", "3", "--passes", "7", "--samples", "2"]
            proc = run_cli([*args, "--sample-time", "0.01", "--engine", engine, "-o", str(out)])
            assert proc.returncode == 0, proc.stderr
            made[engine] = out
        return made[engine]

    return run


@pytest.mark.parametrize("engine", ["native", "python"])
def test_a_streamed_step_moves_window_times_passes_messages_and_checks_them(
    streamed: Callable[[str], Path], engine: str
) -> None:
    """Three buffers, seven passes: 21 messages a step through 3 slots (rendezvous at 64 KiB, eager at
    4 KiB), every step's payload checked; the accounting says so."""
    entries = load_results(str(streamed(engine)))["results"]
    assert [e["size_bytes"] for e in entries] == [4096, 65536]
    for entry in entries:
        assert entry["engine"] == engine and entry["validated"] and entry["wrong_bytes"] == 0
        assert entry["window"] == 3 and entry["passes"] == 7
        assert entry["messages_per_sample"] == entry["iterations"] * 21
        assert entry["bandwidth_gbps"] > 0


def test_a_corrupted_message_of_a_streamed_step_is_caught(tmp_path: Path) -> None:
    """The planted corruption lands in a buffer that carries several passes: the check after the
    step still names it (what is checked is each buffer's last message, in full)."""
    env = rdmabench_env(RDMABENCH_FAULT="corrupt:1")
    args = ["run", "--np", "2", "--sizes", "64KiB", "--window", "2", "--passes", "5", "--warmup", "1"]
    proc = run_cli([*args, "--samples", "1", "-o", str(tmp_path / "r.json")], env=env)
    assert proc.returncode != 0
    assert "wrong" in proc.stderr.lower() or "mismatch" in proc.stderr.lower(), proc.stderr


def _lat(tmp_path: Path, passes: int) -> dict[str, Any]:
    out = tmp_path / f"lat{passes}.json"
    args = ["run", "--np", "2", "--test", "lat", "--sizes", "8", "--passes", str(passes), "--samples", "3"]
    proc = run_cli([*args, "--sample-time", "0.02", "-o", str(out)])
    assert proc.returncode == 0, proc.stderr
    (entry,) = load_results(str(out))["results"]
    return entry  # type: ignore[no-any-return]


def test_lat_makes_its_round_trips_in_a_row_and_divides_by_them(tmp_path: Path) -> None:
    """A lat step of 50 round trips: 50 round trips a step in the accounting, and the figure is half
    the mean round trip. No timing is compared (a loaded machine makes any ratio of two runs noise):
    the time the figures stand for, each half a round trip of every round trip of a sample, fits in
    the round's own wall clock; a figure not divided by the 50 round trips would stand for 50 times
    the samples' time, far more than the round took."""
    entry = _lat(tmp_path, 50)
    assert entry["passes"] == 50 and entry["messages_per_sample"] == entry["iterations"] * 50
    assert entry["scope"] == "half round trip" and entry["unit"] == "us"
    stood_for = sum(2 * us * 1e-6 * entry["messages_per_sample"] for us in entry["samples"])
    assert 0 < stood_for <= entry["round_seconds"], (stood_for, entry["round_seconds"], entry["samples"])


@pytest.mark.perf
def test_lat_of_50_round_trips_a_step_is_about_one_round_trip(tmp_path: Path) -> None:
    """On a quiet machine a step of 50 round trips gives the figure of one round trip a step, not 50
    times it (a benchmark: four busy-polling ranks on two cores made it {1: 0.32, 50: 53.15} us)."""
    figures = {passes: _lat(tmp_path, passes)["latency_us"] for passes in (1, 50)}
    assert figures[50] < 10 * figures[1], figures


def test_passes_out_of_range_are_refused_in_one_line(tmp_path: Path) -> None:
    proc = run_cli_here(["run", "--np", "2", "--passes", "0", "-o", str(tmp_path / "r.json")])
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2 and len(lines) == 1 and "--passes" in lines[0], proc.stderr
    assert not (tmp_path / "r.json").exists()


def test_a_file_from_before_streaming_still_reads_one_pass(streamed: Callable[[str], Path], tmp_path: Path) -> None:
    """Schema-2 files written before streaming have no `passes` in their profiles: one pass (a copy
    of the streamed run, its links file beside it under its own name)."""
    source = streamed("native")
    out = tmp_path / source.name
    shutil.copy(links_path(str(source)), links_path(str(out)))
    summary = json.loads(source.read_text())
    for profile in summary["profiles"]:
        assert profile.pop("passes", None) == 7
    out.write_text(json.dumps(summary))
    entries = load_results(str(out))["results"]
    assert entries and all(
        e["messages_per_sample"] == e["iterations"] * e["window"] == e["iterations"] * 3 for e in entries
    )


def test_passes_shrink_where_one_pass_is_slow() -> None:
    """On a slow link a step must not stream for seconds: the first warm-up pass sets the passes."""
    from rdmabench.measure.plan import make_plan, passes_for

    plan = make_plan(True, 64 << 10, HOST, 4, None, None, 2, 0.01, None)
    assert plan.auto_passes and plan.passes == MAX_PASSES
    assert passes_for(0.1, plan) == 1  # 100 ms a pass (a 20 Mbit/s link): one pass a step
    assert passes_for(1e-6, plan) == MAX_PASSES  # a fast link keeps the byte budget's passes
    given = make_plan(True, 64 << 10, HOST, 4, None, None, 2, 0.01, None, passes=8)
    assert not given.auto_passes and given.passes == 8


def test_one_buffer_lays_the_window_out_as_ucx_perftest_does(tmp_path: Path) -> None:
    """--one-buffer: every message of a window in one buffer per end. Proved by the pinned cap: 8
    messages of 1 MiB in flight fit under --max-pinned 3MiB only if they share one buffer."""
    common = ["run", "--mode", "pinned", "--max-pinned", "3MiB", "--window", "8", "--sizes", "1MiB", "--no-validate"]
    common += ["--samples", "2", "--sample-time", "0.01"]
    refused = run_cli([*common, "-o", str(tmp_path / "many.json")], timeout=120)
    assert refused.returncode != 0 and "more than --max-pinned 3MiB" in refused.stderr
    out = tmp_path / "one.json"
    proc = run_cli([*common, "--one-buffer", "-o", str(out)], timeout=120)
    assert proc.returncode == 0, proc.stderr
    doc = load_results(str(out))
    (entry,) = doc["results"]
    assert entry["one_buffer"] is True and entry["window"] == 8 and entry["bandwidth_gbps"] > 0
    assert doc["metadata"]["config"]["one_buffer"] is True
