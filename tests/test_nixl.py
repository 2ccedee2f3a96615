"""The NIXL anchor (`rdmabench anchor --against nixl`): NIXL's UCX backend in two real processes of its
own and rdmabench's real ranks moving the same block lists, end to end on host memory; the one-line
refusal where NIXL is not installed; NIXL's UCX protocol report; the rounds' medians."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import Any

import pytest

from rdmabench.anchor import nixl, nixl_table
from rdmabench.anchor.rounds import round_lines
from rdmabench.hardware.gpu import visible_gpu_count
from rdmabench.measure.beside import asked
from rdmabench.measure.kvhandoff import handoff
from rdmabench.wire import native

from .conftest import StandInLoad, run_cli, run_cli_here

DATA = Path(__file__).resolve().parent / "data"
REPO = Path(__file__).resolve().parents[1]
needs_nixl = pytest.mark.skipif(
    nixl.missing() is not None, reason="NIXL is not installed (pip install --no-deps nixl-cu13; .ci/run tries)"
)
needs_native = pytest.mark.skipif(native.load().library is None, reason=f"no native loop: {native.load().reason}")


def _one_line(proc: subprocess.CompletedProcess[str]) -> str:
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    return lines[0]


@needs_nixl
@needs_native
def test_the_nixl_anchor_runs_end_to_end_on_host_memory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """NIXL (before and after, each way it posts) and rdmabench (unchecked, checked) move 16 random 4 KiB
    blocks by WRITE; a row a NIXL variant holds both sides' figures, their ratios, their cold costs and
    the protocol each UCX chose: NIXL's scatter-gather list where asked, never where not (not even
    from a caller's environment)."""
    out = tmp_path / "nixl.json"
    args = ["anchor", "--against", "nixl", "--sizes", "4KiB", "--blocks", "16", "--layout", "random", "-o", str(out)]
    args += ["--nixl-seconds", "0.05"]
    monkeypatch.setenv("NIXL_UCX_SGL_ENABLE", "1")  # the default row must still be NIXL's default
    proc = run_cli(args, timeout=600)
    assert proc.returncode == 0, proc.stderr
    written = json.loads(out.read_text())
    assert written["schema"]["name"] == "rdmabench-anchor" and written["against"] == "nixl"
    row, sgl = written["rows"]
    assert (row["nixl_variant"], sgl["nixl_variant"]) == ("default", "sgl")
    assert "sgl" not in row["nixl_transport"] and "sgl" in sgl["nixl_transport"], (row, sgl)
    assert sgl["rdmabench_gbps"] == row["rdmabench_gbps"]  # one rdmabench run, beside each NIXL
    assert "4KiB default " in proc.stdout and "4KiB     sgl " in proc.stdout and "NIXL sgl:" in proc.stdout
    assert (row["test"], row["nixl_operation"], row["mode"], row["count"], row["layout"]) == (
        "put", "WRITE", "host", 16, "random",
    )  # fmt: skip
    assert row["nixl_gbps"] == pytest.approx((row["nixl_before"] + row["nixl_after"]) / 2)
    assert row["ratio_gbps"] == pytest.approx(row["rdmabench_gbps"] / row["nixl_gbps"])
    assert row["ratio_p99"] == pytest.approx(row["rdmabench_p99_us"] / row["nixl_p99_us"])
    assert row["validation_share"] == pytest.approx(row["checked_gbps"] / row["rdmabench_gbps"])
    for side in ("nixl", "rdmabench"):
        assert 0 < row[f"{side}_p50_us"] <= row[f"{side}_p99_us"] <= row[f"{side}_p999_us"]
        assert 0 < row[f"{side}_post_share"] <= 1 and row[f"{side}_descriptors_per_s"] > 0
        assert row[f"{side}_cpu_s_per_gb"] > 0 and row[f"{side}_vs_one"] > 0
        assert row[f"{side}_cold_first_transfer_s"] > 0 and f"{side}_cold_register_s" in row
    assert row["nixl_cold_metadata_s"] > 0 and row["nixl_cold_prepare_s"] > 0 and row["rdmabench_cold_keys_s"] > 0
    # Each UCX reported its protocol (UCX_PROTO_INFO=y): on one host, a one-sided put by cma or shared memory.
    assert "None" not in row["nixl_transport"] and "None" not in row["transport"], row
    assert "ratio = rdmabench / NIXL" in proc.stdout and "# cold, seconds" in proc.stdout
    # NIXL's own telemetry (on, as vLLM's connector has it): every random block posted, none merged.
    assert row["nixl_descriptors_posted"] == 16 and row["nixl_own_transfer_us"] > 0 and row["nixl_threads"] == 0
    # rdmabench's CPU path merges neighbours as NIXL does: the same count of requests, said beside NIXL's.
    assert (
        row["rdmabench_descriptors_posted"] == row["nixl_descriptors_posted"] and "(rdmabench cpu: 16)" in proc.stdout
    )


@needs_nixl
@needs_native
def test_the_nixl_anchor_reads_a_models_handoff() -> None:
    """READ (vLLM's decode reads the prefill's blocks) of a 2-layer model's vLLM list: 16 descriptors in 4
    regions of each pool, NIXL's landed check included (a wrong block would fail the run)."""
    found = handoff("llama-3.1-8b,layers=2", "vllm", 64)
    plan = nixl.NixlPlan(tests=("get",), handoff=found, variants=("default",), seconds=0.1, samples=2, sample_time=0.02)
    (row,) = nixl.compare(plan)
    assert (row["test"], row["nixl_operation"], row["count"], row["regions"], row["size_bytes"]) == (
        "get", "READ", 16, 4, 32768,
    )  # fmt: skip
    assert row["handoff"]["descriptors"] == 16 and row["handoff"]["model"]["name"] == "llama-3.1-8b,layers=2"
    assert row["case"].startswith("llama-3.1-8b,layers=2 vllm 64 tok") and row["nixl_gbps"] > 0
    assert row["rdmabench_gbps"] > 0 and row["ratio_gbps"] > 0


def _site_without_nixl(tmp_path: Path) -> Path:
    """This environment's packages, every one but NIXL's, as links in a folder of their own."""
    site = Path(sysconfig.get_paths()["purelib"])
    folder = tmp_path / "site"
    folder.mkdir()
    for entry in site.iterdir():
        if not entry.name.startswith(("nixl", ".nixl")):
            (folder / entry.name).symlink_to(entry)
    return folder


def test_without_nixl_the_anchor_says_so_in_one_line(tmp_path: Path) -> None:
    """A Python that cannot import NIXL (its site-packages without it): one line, how to install it, exit 2,
    nothing measured and no file written."""
    env = dict(os.environ, PYTHONPATH=f"{REPO}{os.pathsep}{_site_without_nixl(tmp_path)}")
    out = tmp_path / "a.json"
    proc = subprocess.run(
        [sys.executable, "-S", "-m", "rdmabench", "anchor", "--against", "nixl", "-o", str(out)],
        capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path,
    )  # fmt: skip
    line = _one_line(proc)
    assert "NIXL is not installed here" in line and "pip install --no-deps nixl-cu13" in line, line
    assert proc.stdout == "" and not out.exists()


def test_the_nixl_anchors_options_need_it() -> None:
    line = _one_line(run_cli_here(["anchor", "--blocks", "64"]))
    assert "--blocks is an option of the NIXL anchor: add --against nixl" in line
    assert "--nixl-threads is an option of the NIXL anchor" in _one_line(
        run_cli_here(["anchor", "--nixl-threads", "4"])
    )
    assert "unknown anchor 'nccl'" in _one_line(run_cli_here(["anchor", "--against", "nccl"]))
    assert "--nixl is an option of the NIXL anchor" in _one_line(run_cli_here(["anchor", "--nixl", "sgl"]))
    assert "--beside is an option of the NIXL anchor" in _one_line(run_cli_here(["anchor", "--beside", "gemm"]))


def test_the_nixl_anchor_reads_beside_as_run_does_and_runs_one_carve_out_or_refuses() -> None:
    """--beside is resolved as run resolves it (measure.beside.asked): a carve-out list is refused in
    one line, before NIXL is looked for (it measured carve-out 0 alone, silently); one carve-out is the
    load both sides run beside, and rdmabench's own run is asked for it."""
    line = _one_line(run_cli_here(["anchor", "--against", "nixl", "--mode", "device", "--beside", "gemm,carveout=all"]))
    assert "carveout=0,4,8,16" in line and "give one carve-out" in line, line
    plan = nixl.NixlPlan(beside=asked("gemm,carveout=8"))
    assert plan.load is not None and plan.load.label == "gemm:8192,carveout=8" and plan.load.carveout == 8
    assert nixl.NixlPlan().load is None


@needs_nixl
@pytest.mark.parametrize(
    "args, message",
    [
        (["--tests", "bw"], "compares put (WRITE) and get (READ), not 'bw'"),
        (["--layout", "diagonal"], "unknown --layout 'diagonal'"),
        (["--model", "llama-3.1-8b", "--blocks", "4"], "leave out --blocks and --sizes"),
        (["--prompt", "64"], "give --model as well"),
        (["--sizes", "1004"], "multiple of 8 bytes"),
        (["--nixl-threads", "-1"], "--nixl-threads must be 0 (NIXL's default) or more"),
        (["--nixl", "sgl,fast"], "unknown --nixl 'fast': choose default, sgl"),
        (["--posting", "gpu,warp"], "unknown --posting 'warp'"),
        (["--posting", "all"], "--posting chooses who posts lists of device memory: add --mode device"),
        (["--beside", "gemm"], "--beside runs a compute load on the GPUs that move the list: add --mode device"),
        (["--beside", "gemm:7"], "--beside gemm:M takes M from 256"),
    ],
)
def test_bad_nixl_anchor_options_are_one_line(args: list[str], message: str) -> None:
    assert message in _one_line(run_cli_here(["anchor", "--against", "nixl", *args]))


@needs_nixl
@pytest.mark.skipif(visible_gpu_count() > 0, reason="this machine has a GPU")
def test_device_memory_without_a_gpu_is_one_line(tmp_path: Path) -> None:
    assert "device memory needs a GPU" in _one_line(run_cli_here(["anchor", "--against", "nixl", "--mode", "device"]))
    out = tmp_path / "beside.json"
    args = ["anchor", "--against", "nixl", "--mode", "device", "--beside", "gemm", "-o", str(out)]
    assert "device memory needs a GPU" in _one_line(run_cli_here(args)) and not out.exists()


def test_the_protocol_nixl_reports_for_its_operation() -> None:
    """A real NIXL initiator's log: its put's transport, from the last table of the operation."""
    log = (DATA / "ucx_proto_info_nixl.log").read_text()
    assert nixl.transport_of(log, "put", 65536) == "cma/memory (zero-copy, multi)"
    assert nixl.transport_of(log, "get", 65536) is None  # no get was made


def _row(ratio: float, nixl_before: float, nixl_after: float) -> dict[str, object]:
    return {
        "test": "put", "mode": "host", "case": "1024 random", "size_bytes": 4096, "count": 1024,
        "nixl_gbps": (nixl_before + nixl_after) / 2, "nixl_before": nixl_before, "nixl_after": nixl_after,
        "nixl_drift": abs(nixl_after - nixl_before) / ((nixl_before + nixl_after) / 2), "rdmabench_gbps": 1.0,
        "ratio_gbps": ratio, "ratio_p99": 1 / ratio, "transport": "cma/memory (zero-copy)", "nixl_transport": "x",
    }  # fmt: skip


def test_repeated_rounds_give_medians_spread_and_steady_rounds() -> None:
    rounds = [[_row(1.2, 1.0, 1.0)], [_row(0.8, 1.0, 2.0)], [_row(1.4, 1.0, 1.05)]]
    (row,) = nixl.median_rows(rounds)  # type: ignore[arg-type]
    assert row["ratio_gbps"] == 1.2 and row["runs"]["ratio_gbps"] == [1.2, 0.8, 1.4] and row["rounds"] == 3
    assert row["count"] == 1024 and isinstance(row["count"], int)  # what was measured: no median of it
    assert row["steady_rounds"] == 2 and row["steady_ratio_gbps"] == pytest.approx(1.3)
    lines = round_lines([row], nixl_table._round_heading, nixl_table._round_line)
    assert (
        "median of 3 rounds" in lines[0] and "GB/s ratio 0.80-1.40" in lines[1] and "steady rounds 2 of 3" in lines[1]
    )


@needs_nixl
@needs_native
@pytest.mark.gpu
@pytest.mark.skipif(visible_gpu_count() == 0, reason="needs a CUDA GPU and CuPy")
@pytest.mark.parametrize("test", ["put", "get"])
def test_the_nixl_anchor_moves_gpu_memory(test: str) -> None:
    """VRAM at both ends (two processes on one GPU, or GPU 0 and 1), each way NIXL posts: NIXL registers
    CuPy memory, its landed check reads it back; both sides report their transport (a put's: CUDA's,
    NIXL's scatter-gather list where asked)."""
    plan = nixl.NixlPlan(
        sizes=(65536,), counts=(64,), tests=(test,), mode="device", seconds=0.2, samples=2, sample_time=0.05
    )
    rows = nixl.compare(plan)
    assert [row["nixl_variant"] for row in rows] == ["default", "sgl"]
    for row in rows:
        assert row["mode"] == "device" and row["nixl_gbps"] > 0 and row["rdmabench_gbps"] > 0
        assert "None" not in row["transport"] and "None" not in row["nixl_transport"], row
        if test == "put":  # (UCX 1.21 emulates a get of GPU memory over shared memory)
            assert "cuda" in row["transport"] and "cuda" in row["nixl_transport"], row
    assert "sgl" not in rows[0]["nixl_transport"]
    if test == "put":  # (NIXL's UCX 1.22 reads GPU memory without the list: its get row says so)
        assert "sgl" in rows[1]["nixl_transport"], rows[1]


@needs_nixl
@needs_native
@pytest.mark.gpu
@pytest.mark.skipif(visible_gpu_count() < 2, reason="needs two GPUs: a compute load on each end's own")
def test_the_nixl_anchor_beside_a_gemm_gives_both_sides_slowdowns() -> None:
    """Both sides move the list while both GPUs run a GEMM: each row carries the list alone and beside,
    the GEMM's slowdown on both sides (sane: at least 0.9, a range around it) and the load's rate alone;
    every path rdmabench offers gets its rows, each validated in the checked run."""
    from rdmabench.measure.beside import asked

    plan = nixl.NixlPlan(
        sizes=(65536,), counts=(64,), mode="device", posting="all", beside=asked("gemm:4096"),
        seconds=0.3, samples=3, sample_time=0.05,
    )  # fmt: skip
    rows = nixl.compare(plan)
    paths = list(dict.fromkeys(row["rdmabench_posted_by"] for row in rows))
    skipped = set(rows[0].get("rdmabench_skipped") or {})
    assert set(paths) | skipped == {"gpu", "ce-batch", "ce-armed", "cpu"} and not set(paths) & skipped, (paths, skipped)
    assert [(row["rdmabench_posted_by"], row["nixl_variant"]) for row in rows] == [
        (path, variant) for path in paths for variant in plan.variants
    ]
    for row in rows:
        assert row["beside_load"] == "gemm:4096" and row["beside_unit"] == "TFLOP/s"
        for side in ("nixl", "rdmabench"):
            assert row[f"{side}_gbps"] > 0 and row[f"{side}_alone_gbps"] > 0 and row[f"{side}_beside_gbps"] > 0, row
            if row[f"{side}_slowdown"] is None:  # no pair judged (ce-armed: in flight for little of the window)
                assert row[f"{side}_unjudged"], row
            else:
                assert row[f"{side}_slowdown"] >= 0.9, row
                assert row[f"{side}_slowdown_min"] <= row[f"{side}_slowdown"] <= row[f"{side}_slowdown_max"]
            assert row[f"{side}_load_alone"] > 0
        assert row["checked_gbps"] > 0
        assert 0 < row["rdmabench_vs_one"] and 0 < row["nixl_vs_one"]
        assert row["ratio_beside_gbps"] == pytest.approx(row["rdmabench_beside_gbps"] / row["nixl_beside_gbps"])
    text = nixl_table.format_rows(rows)
    assert "# BESIDE gemm:4096 on both GPUs" in text and "slowdown" in text


def test_the_beside_lines_give_throughput_and_both_sides_slowdowns() -> None:
    """Generated rows (not measured): beside compute, the lines under the table give each side's
    throughput alone -> beside and the slowdown with its range, per rdmabench path and NIXL variant."""
    row = _row(1.0, 1.0, 1.0) | {
        "test": "put", "mode": "device", "case": "1024 random", "size_bytes": 4096, "rdmabench_posted_by": "gpu",
        "nixl_variant": "sgl", "beside_load": "gemm:8192", "beside_unit": "TFLOP/s", "rdmabench_alone_gbps": 170.6,
        "rdmabench_beside_gbps": 5.2, "nixl_alone_gbps": 3.84, "nixl_beside_gbps": 4.48, "rdmabench_slowdown": 1.0002,
        "rdmabench_slowdown_min": 0.99, "rdmabench_slowdown_max": 1.03, "nixl_slowdown": None,
    }  # fmt: skip
    lines = nixl_table._beside_lines([row])
    assert "all bytes over all transfers' time" in lines[0] and "TFLOP/s" in lines[0]
    assert "rdmabench gpu 171 -> 5.2 GB/s slowdown 1.000 [0.99-1.03]" in lines[1], lines[1]
    assert "NIXL sgl 3.84 -> 4.48 GB/s slowdown - (not judged: no whole operation" in lines[1], lines[1]
    assert lines[1].endswith("ratio beside -"), lines[1]
    armed = row | {
        "rdmabench_posted_by": "ce-armed",
        "rdmabench_slowdown": None,
        "rdmabench_unjudged": "in flight 8% of the window",
    }
    assert (
        "rdmabench ce-armed 171 -> 5.2 GB/s slowdown - (not judged: in flight 8% of the window)"
        in nixl_table._beside_lines([armed])[1]
    )
    skipped = nixl_table._skipped_lines([row | {"rdmabench_skipped": {"ce-batch": "rank 0 cannot: no CUDA 12.8"}}] * 2)
    assert skipped == ["# rdmabench --posting ce-batch: left out, rank 0 cannot: no CUDA 12.8"]
    assert nixl_table._beside_heading([row])[0].startswith("# BESIDE gemm:8192 on both GPUs")
    assert nixl_table._beside_lines([_row(1.0, 1.0, 1.0)]) == [] and nixl_table._beside_heading([]) == []


def _lockstep(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fail: bool) -> tuple[Any, Any, dict[str, StandInLoad]]:
    """NIXL's two ends' pairs (nixl_beside) in two threads meeting through a real private folder, each with
    its own fake load, not released (the test sees if each end stopped its own), busy with the transfers."""
    import threading
    import time

    from rdmabench import privatedirs
    from rdmabench.anchor import nixl_beside
    from rdmabench.errors import RdmabenchError
    from rdmabench.measure.beside import Beside

    folder = privatedirs.scratch_dir("rdmabench-test-lockstep-", tmp_path)

    class SharedLoad(StandInLoad):
        """Busy while some pair's transfers run: from the initiator's `started` to its `stop`."""

        @property  # type: ignore[override]
        def busy(self) -> bool:
            return any(
                (folder / f"pair-{i}.started").exists() and not (folder / f"pair-{i}.stop").exists() for i in range(3)
            )

        @busy.setter
        def busy(self, value: bool) -> None:
            pass

    loads = {"initiator": SharedLoad(step=1, ring=1 << 16), "target": SharedLoad(step=1, ring=1 << 16)}
    owner = {threading.get_ident(): "initiator"}

    def load_here(beside: Any) -> StandInLoad:
        role = owner.get(threading.get_ident(), "target")
        if role == "target" and fail:
            raise RdmabenchError("the compute load on GPU 1: out of memory")
        return loads[role]

    monkeypatch.setattr(nixl_beside, "load_on_this_gpu", load_here)
    monkeypatch.setattr("rdmabench.measure.pairs.SETTLE_SECONDS", 0.0)  # a stand-in has no power limit
    monkeypatch.setattr(nixl_beside, "release_loads", lambda: None)
    plan, beside, found = {"pairs": 3}, Beside("gemm", 1024), dict[str, Any]()

    def target() -> None:
        try:
            found["target"] = nixl_beside.target_pairs(folder, plan, beside, time.monotonic() + 30)
        except RdmabenchError as exc:
            found["target"] = exc

    def transfers() -> int:
        time.sleep(0.002)
        return 1

    thread = threading.Thread(target=target)
    thread.start()
    try:
        deadline = time.monotonic() + (2 if fail else 30)
        found["initiator"] = nixl_beside.initiator_pairs(folder, plan, beside, transfers, deadline)
    except Exception as exc:
        found["initiator"] = exc
    thread.join(30)
    return found["initiator"], found["target"], loads


def test_nixls_two_ends_keep_their_pairs_in_step(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Three pairs, both ends through the folder's files: the initiator's transfers run, back to back,
    until both ends' shared windows have ended, so each end's load ran its whole window beside them
    (slowdown 2 on both); the worse GPU is taken pair by pair."""
    from rdmabench.measure.besiderecord import GpuFigure
    from rdmabench.measure.judging import worse_pairs

    (runs, mine), theirs, loads = _lockstep(tmp_path, monkeypatch, fail=False)
    assert not any(load.running for load in loads.values())  # each end stopped the load it ran on between pairs
    assert len(runs) == 3 and all(run >= 1 for run in runs)  # each pair's transfers, added up
    assert mine["operations"] == [80] * 3 and theirs["operations"] == [80] * 3 and theirs["settle"]["settled"]
    assert mine["slowdown_pairs"] == [2.0, 2.0, 2.0] and theirs["slowdown_pairs"] == [2.0, 2.0, 2.0]
    gpus = [GpuFigure.from_json(mine), GpuFigure.from_json(theirs)]  # each end's file, read back
    assert worse_pairs([gpu for gpu in gpus if gpu is not None]) == [2.0, 2.0, 2.0]


def test_an_end_that_fails_before_its_pair_leaves_the_other_a_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The target's load could not start: the initiator stops at the first pair with a line naming the
    file it waited for (the anchor reports the target's own line first: its process exited)."""
    from rdmabench.anchor.nixl_files import AgentError

    mine, theirs, loads = _lockstep(tmp_path, monkeypatch, fail=True)
    assert not loads["initiator"].running  # the load it had settled and kept running, stopped on the error
    assert isinstance(theirs, Exception) and "out of memory" in str(theirs)
    assert isinstance(mine, AgentError) and "pair-0.ready" in str(mine), mine


def test_the_shared_cuda_header_is_part_of_both_builds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A change to cudacommon.cuh (included by devlists.cu and gpuload.cu) gives both libraries new names:
    a cached build of the old header is never loaded for the new one."""
    from rdmabench.wire import devapi, gpuload

    before = devapi.library_name(tmp_path, "nvcc")
    other = tmp_path / "cudacommon.cuh"
    other.write_bytes(devapi.COMMON.read_bytes() + b"\n/* changed */\n")
    monkeypatch.setattr(devapi, "COMMON", other)
    assert devapi.library_name(tmp_path, "nvcc") != before
    load_before = gpuload.library_name("nvcc")
    monkeypatch.setattr(gpuload, "COMMON", other)
    assert gpuload.library_name("nvcc") != load_before


def test_an_agents_figures_hold_every_field_its_reader_takes_in_order() -> None:
    """nixl_agent.summarize: the Figures the anchor's rows read (nixl_files), every field in the order the
    agent wrote them before they were typed, the telemetry's median, and the CPU over the bytes moved."""
    from rdmabench.anchor import nixl_agent
    from rdmabench.anchor.nixl_files import Figures, Telemetry

    timed = nixl_agent.Timed([2e-6, 4e-6, 6e-6], [1e-6] * 3, [5e-7] * 3, [(1.0, 3.0, 8), (2.0, 5.0, 4)], 0.5, 1e-3)
    found = nixl_agent.summarize(timed, moved=4096, count=8)
    written = ["transfers", "transfer_us", "transfer_gbps_p50", "transfer_gbps_mean", "descriptors_per_second_p50"]
    written += ["post_us_p50", "post_share_p50", "make_us_p50", "nixl_telemetry", "first_transfer_s", "cpu_s_per_gb"]
    assert list(found) == written and set(written) <= set(Figures.__annotations__)
    assert found["transfers"] == 3 and found["transfer_us"]["p50"] == pytest.approx(4.0)
    assert found["transfer_gbps_p50"] == pytest.approx(4096 / 4e-6 / 1e9)
    assert found["nixl_telemetry"] == Telemetry(post_us_p50=1.5, transfer_us_p50=4.0, descriptors_posted=4)
    assert found["cpu_s_per_gb"] == pytest.approx(0.5 / (3 * 4096 / 1e9))


def test_nixl_figures_are_the_mean_of_a_pairs_two_runs() -> None:
    """nixl._nixl_figures reads two PairRuns (the agents' result files, nixl_files): each figure the mean of
    the runs before and after rdmabench's, the target's cold costs its own, the drift between the runs."""
    from rdmabench.anchor import nixl_agent
    from rdmabench.anchor.nixl_files import PairRun

    def run(seconds: float, register_s: float) -> PairRun:
        timed = nixl_agent.Timed([seconds] * 3, [seconds / 4] * 3, [0.0] * 3, [(1.0, 2.0, 8)], 0.1, 1e-3)
        blocks, reference = nixl_agent.summarize(timed, 8192, 8), nixl_agent.summarize(timed, 8192, 1)
        return {
            "target": {"agent_s": 0.1, "register_s": register_s, "metadata_s": 0.01},
            "initiator": {"blocks": blocks, "reference": reference, "cold_s": {"agent": 0.2}, "backend": "UCX"},
            "transport": "rc_mlx5/mlx5_0:1",
        }

    found = nixl._nixl_figures(run(1e-6, 0.5), run(2e-6, 1.5))
    assert found["nixl_gbps"] == pytest.approx((8192 / 1e-6 + 8192 / 2e-6) / 2 / 1e9)
    assert found["nixl_drift"] == pytest.approx(abs(8192 / 2e-6 - 8192 / 1e-6) / 1e9 / found["nixl_gbps"])
    assert found["nixl_cold_target_register_s"] == pytest.approx(1.0)
    assert found["nixl_cold_agent_s"] == pytest.approx(0.2) and found["nixl_vs_one"] == pytest.approx(1.0)
    assert found["nixl_own_transfer_us"] == pytest.approx(2.0) and found["nixl_post_share"] == pytest.approx(0.25)


def test_a_side_with_no_pair_judged_says_why() -> None:
    """Generated pairs (not measured): NIXL's transfers in flight for a fifth of each window, and
    rdmabench's entry with no pair judged for drifting: each side's slowdown is None, and the row says why."""
    from rdmabench.anchor import nixl
    from rdmabench.measure.beside import Beside

    gpu = {
        "load": "gemm:4096",
        "slowdown_pairs": [1.01, 1.02],
        "duty_pairs": [0.2, 0.22],
        "drifting_pairs": [],
        "alone": 600.0,
    }
    figures = {"transfer_gbps_mean": 100.0}
    run: Any = {"initiator": {"beside": figures | {"load": gpu}, "blocks": figures}, "target": {"beside_load": gpu}}
    record = {
        "load": "gemm:4096",
        "slowdown": None,
        "duty": 0.95,
        "slowdown_pairs": [1.0, 1.1],
        "drifting_pairs": [0, 1],
        "transfer_alone": 1.0,
    }
    unchecked = {"beside": record, "bandwidth_gbps": 1.0}
    found = nixl._beside_figures(Beside("gemm", 4096), run, run, unchecked)
    assert found["nixl_slowdown"] is None and found["nixl_unjudged"] == "in flight 21% of the window"
    assert found["rdmabench_slowdown"] is None
    assert found["rdmabench_unjudged"] == "the model alone drifted past 3% in every pair"
