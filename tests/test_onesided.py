"""One-sided tests (put, get, put-lat, get-lat) over real ranks and real UCX remote memory access."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from rdmabench.results.files.document import load as load_results
from rdmabench.wire import native, protoinfo

from .conftest import QUICK, rdmabench_env, refused_in_one_line, run_cli

needs_native = pytest.mark.skipif(native.load().library is None, reason=f"no native loop: {native.load().reason}")
OPERATION = {
    "put": protoinfo.RMA_PUT,
    "put-lat": protoinfo.RMA_PUT,
    "get": protoinfo.RMA_GET,
    "get-lat": protoinfo.RMA_GET,
}


def _entries(results_path: Path, *args: str, np: int = 2) -> list[dict[str, Any]]:
    proc = run_cli(["run", "--np", str(np), "-o", str(results_path), *QUICK, *args])
    assert proc.returncode == 0, proc.stderr
    return load_results(str(results_path))["results"]  # type: ignore[no-any-return]


@needs_native
@pytest.mark.parametrize("test", ["put", "get", "put-lat", "get-lat"])
def test_one_sided_over_shared_memory_is_validated_and_names_its_transport(results_path: Path, test: str) -> None:
    entries = _entries(results_path, "--test", test, "--sizes", "8,64KiB", "--mode", "pinned")
    assert [e["size_bytes"] for e in entries] == [8, 65536]
    for entry in entries:
        assert entry["test"] == test and entry["validated"] and entry["wrong_bytes"] == 0
        assert entry["engine"] == "native" and (entry["src_rank"], entry["dst_rank"]) == (0, 1)
        # The transport comes from the initiator's put or get table of UCX's report, not the tag tables.
        assert entry["ucx_report"]["decided_by"] == OPERATION[test], entry["ucx_report"]
        assert entry["transport"] and entry["ucx_report"]["initiator_rma"].endswith(entry["transport"])
        assert not any("did not report" in w for w in entry["warnings"]), entry["warnings"]
        if test in ("put", "get"):
            assert entry["bandwidth_gbps"] > 0 and entry["window"] >= 1
            assert entry["link_limit"] is not None or entry["link_limit_unknown"]
        else:
            assert entry["latency_us"] > 0 and entry["window"] is None


@needs_native
@pytest.mark.parametrize("test", ["put", "put-lat", "get"])
def test_memory_allocated_by_ucx_is_attached_by_the_peer(results_path: Path, test: str) -> None:
    """`--mode ucx`: host memory UCX allocates from a shared segment (as ucx_perftest's): a small put
    becomes a store into the attached segment instead of a cma system call."""
    small, large = _entries(results_path, "--test", test, "--sizes", "8,64KiB", "--mode", "ucx")
    assert small["src_mode"] == small["dst_mode"] == "ucx" and small["validated"] and large["validated"]
    if test != "get":
        assert small["transport"].split("/")[0] in ("sysv", "posix", "xpmem"), small["transport"]
    assert large["transport"] and not any("did not report" in w for w in large["warnings"])


@needs_native
@pytest.mark.parametrize("test", ["put", "get", "put-lat"])
def test_a_corrupted_one_sided_message_is_caught(results_path: Path, test: str) -> None:
    proc = run_cli(
        ["run", "--np", "2", "--test", test, "--sizes", "4096", "--warmup", "1", "-o", str(results_path), *QUICK],
        env=rdmabench_env(RDMABENCH_FAULT="corrupt:1"),
    )
    assert proc.returncode != 0
    assert "wrong byte(s) of" in proc.stderr and "from rank 0" in proc.stderr, proc.stderr


@needs_native
def test_one_sided_tests_run_in_every_concurrent_pattern(tmp_path: Path) -> None:
    ring = _entries(tmp_path / "ring.json", "--test", "get", "--pattern", "ring", "--sizes", "4096", np=3)
    assert sorted((e["src_rank"], e["dst_rank"]) for e in ring) == [(0, 1), (1, 2), (2, 0)]
    assert all(e["concurrent_links"] == 3 and e["pattern_aggregate_gbps"] > 0 for e in ring)
    pairs = _entries(
        tmp_path / "pairs.json", "--test", "put", "--pattern", "all-pairs", "--concurrent", "--sizes", "4096", np=3
    )
    assert len(pairs) == 6 and all(e["validated"] and e["transport"] for e in pairs)


@needs_native
def test_a_stalled_target_trips_the_watchdog(results_path: Path) -> None:
    proc = run_cli(
        ["run", "--np", "2", "--test", "put", "--sizes", "4096", "--timeout", "3", "-o", str(results_path), *QUICK],
        env=rdmabench_env(RDMABENCH_FAULT="stall:2"),
        timeout=120,
    )
    assert proc.returncode != 0 and "timed out" in proc.stderr, proc.stderr


@pytest.mark.parametrize(
    "args, message",
    [
        (["--test", "put", "--mode", "staged"], "--test put cannot use staged memory"),
        (["--test", "get", "--src-mode", "pinned", "--dst-mode", "bounce"], "--test get cannot use bounce memory"),
        (["--test", "put-lat", "--mode", "device"], "--test put-lat cannot use device memory"),
        (["--test", "get", "--engine", "python"], "runs in the native loop only"),
        (["--test", "get-lat", "--pattern", "ring"], "measures one link at a time"),
        (["--test", "bw", "--mode", "ucx"], "--test bw cannot use ucx memory"),
    ],
)
def test_one_sided_refusals_are_one_line(tmp_path: Path, args: list[str], message: str) -> None:
    refused_in_one_line(tmp_path, args, message)


def test_without_the_native_loop_a_one_sided_run_says_why_in_one_line(tmp_path: Path) -> None:
    env = rdmabench_env(
        CC=str(tmp_path / "no-such-cc"), RDMABENCH_CACHE_DIR=str(tmp_path / "cache"), RDMABENCH_NATIVE="build"
    )
    proc = run_cli(["run", "--np", "2", "--test", "put", "-o", str(tmp_path / "r.json")], env=env)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert "runs in the native loop only" in lines[0] and "cannot build the native loop" in lines[0]
