"""The native hot loop: built for real with the machine's compiler against the libucx wheel's UCX,
run between real ranks, and checked against the Python loop; and what happens without a compiler."""

from __future__ import annotations

from pathlib import Path

import pytest

from rdmabench.results.document import load as load_results
from rdmabench.wire import native

from .conftest import QUICK, rdmabench_env, run_cli

needs_native = pytest.mark.skipif(native.load().library is None, reason=f"no native loop: {native.load().reason}")


def _run(args: list[str], results_path: Path, **env: str) -> dict:  # type: ignore[type-arg]
    proc = run_cli(["run", "--np", "2", "-o", str(results_path), *QUICK, *args], env=rdmabench_env(**env))
    assert proc.returncode == 0, proc.stderr
    return load_results(str(results_path))


@needs_native
@pytest.mark.parametrize("test", ["bw", "bibw", "lat"])
@pytest.mark.parametrize("mode", ["pageable", "pinned"])
def test_native_and_python_loops_agree(test: str, mode: str, tmp_path: Path) -> None:
    docs = {
        engine: _run(["--test", test, "--mode", mode, "--sizes", "8,100000", "--engine", engine], tmp_path / engine)
        for engine in ("native", "python")
    }
    for engine, doc in docs.items():
        assert {e["engine"] for e in doc["results"]} == {engine}
        assert {e["size_bytes"] for e in doc["results"]} == {8, 100000}
        assert all(e["validated"] and e["wrong_bytes"] == 0 for e in doc["results"])
        assert doc["metadata"]["engine"]["requested"] == engine
        assert [r["native"] for r in doc["metadata"]["engine"]["ranks"]] == [engine == "native"] * 2


@needs_native
@pytest.mark.perf
@pytest.mark.parametrize("test", ["bw", "lat"])
def test_the_native_loop_beats_python_on_small_messages(test: str, tmp_path: Path) -> None:
    """An 8-byte message costs the Python loop microseconds of interpreter time per request: the
    native loop must be faster, or it is not doing its job. A timing comparison: on a quiet machine."""
    field = "latency_us" if test == "lat" else "bandwidth_gbps"
    small = {
        engine: _run(["--test", test, "--sizes", "8", "--engine", engine], tmp_path / engine)["results"][0][field]
        for engine in ("native", "python")
    }
    if test == "lat":
        assert small["native"] < small["python"], small
    else:
        assert small["native"] > small["python"], small


@needs_native
def test_native_loop_catches_corruption(results_path: Path) -> None:
    proc = run_cli(
        ["run", "--np", "2", "--engine", "native", "--sizes", "4096", "--warmup", "1", "-o", str(results_path), *QUICK],
        env=rdmabench_env(RDMABENCH_FAULT="corrupt:1"),
    )
    assert proc.returncode != 0 and "wrong byte(s) of 4096" in proc.stderr


def test_without_a_compiler(tmp_path: Path) -> None:
    """auto falls back to the Python loop and says so; native refuses with one line."""
    env = {
        "CC": str(tmp_path / "no-such-cc"),
        "RDMABENCH_CACHE_DIR": str(tmp_path / "cache"),
        "RDMABENCH_NATIVE": "build",
    }
    proc = run_cli(
        ["run", "--np", "2", "--sizes", "8", "-o", str(tmp_path / "auto.json"), *QUICK], env=rdmabench_env(**env)
    )
    assert proc.returncode == 0, proc.stderr
    assert "times in Python (cannot build the native loop" in proc.stdout
    doc = load_results(str(tmp_path / "auto.json"))
    assert doc["results"][0]["engine"] == "python"
    assert not doc["metadata"]["engine"]["ranks"][0]["native"]
    proc = run_cli(["run", "--np", "2", "--engine", "native", "-o", str(tmp_path / "n.json")], env=rdmabench_env(**env))
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert lines[0].startswith("rdmabench: error: --engine native on rank 0") and "cannot build" in lines[0]
    assert not (tmp_path / "n.json").exists()


def test_unknown_engine() -> None:
    proc = run_cli(["run", "--engine", "rust"])
    assert proc.returncode == 2 and "unknown engine 'rust'" in proc.stderr


@needs_native
def test_an_unwritable_cache_falls_back_to_a_private_temporary_directory(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    doc = _run(
        ["--sizes", "8"], tmp_path / "r.json", RDMABENCH_CACHE_DIR=str(blocker / "cache"), RDMABENCH_NATIVE="build"
    )
    assert doc["results"][0]["engine"] == "native", doc["metadata"]["engine"]


@needs_native
def test_ranks_starting_together_build_the_loop_once(tmp_path: Path) -> None:
    """A cold cache: four ranks start at once; one compiles under the lock, the others load its library."""
    log = tmp_path / "compiles.log"
    wrapper = tmp_path / "cc"
    wrapper.write_text(f'#!/bin/sh\necho "$$" >> {log}\nsleep 1\nexec cc "$@"\n')
    wrapper.chmod(0o755)
    env = rdmabench_env(CC=str(wrapper), RDMABENCH_CACHE_DIR=str(tmp_path / "cache"), RDMABENCH_NATIVE="build")
    out = tmp_path / "r.json"
    proc = run_cli(["run", "--np", "4", "--pattern", "ring", "--sizes", "8", "-o", str(out), *QUICK], env=env)
    assert proc.returncode == 0, proc.stderr
    assert len(log.read_text().split()) == 1
    doc = load_results(str(out))
    assert [r["native"] for r in doc["metadata"]["engine"]["ranks"]] == [True] * 4


def _built_at_install_from_this_source() -> bool:
    prefix = native.ucx_prefix()
    return prefix is not None and native._prebuilt(prefix, []) is not None


@pytest.mark.skipif(
    not _built_at_install_from_this_source(),
    reason="no library built at install from this source (a source tree only, or one whose hotloop.c changed since)",
)
def test_the_loop_built_at_install_is_used_without_a_compiler(tmp_path: Path) -> None:
    """`pip install` built the loop (setup.py): a run uses it with no compiler and an empty cache."""
    env = {"CC": str(tmp_path / "no-such-cc"), "RDMABENCH_CACHE_DIR": str(tmp_path / "cache")}
    doc = _run(["--sizes", "8"], tmp_path / "r.json", **env)
    assert {e["engine"] for e in doc["results"]} == {"native"}
    assert all(r["detail"].startswith("built at install against UCX") for r in doc["metadata"]["engine"]["ranks"])
    assert not (tmp_path / "cache").exists() or not list((tmp_path / "cache").iterdir())
