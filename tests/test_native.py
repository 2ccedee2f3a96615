"""The native hot loop: built for real with the machine's compiler against the libucx wheel's UCX,
run between real ranks, and checked against the Python loop; and what happens without a compiler."""

from __future__ import annotations

import ctypes
import hashlib
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from rdmabench.results.files.document import load as load_results
from rdmabench.wire import native

from .conftest import QUICK, rdmabench_env, run_cli, run_cli_here

needs_native = pytest.mark.skipif(native.load().library is None, reason=f"no native loop: {native.load().reason}")


def _run(args: list[str], results_path: Path, **env: str) -> dict:  # type: ignore[type-arg]
    proc = run_cli(["run", "--np", "2", "-o", str(results_path), *QUICK, *args], env=rdmabench_env(**env))
    assert proc.returncode == 0, proc.stderr
    return load_results(str(results_path))


# That the native and Python loops agree on every test and host memory is
# tests/test_p2p.py::test_each_test_and_host_mode's (one run per loop there answers both).


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
    proc = run_cli_here(["run", "--engine", "rust"])
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
    reason="no library built at install from this source (a source tree only, or one whose loop source changed since)",
)
def test_the_loop_built_at_install_is_used_without_a_compiler(tmp_path: Path) -> None:
    """`pip install` built the loop (setup.py): a run uses it with no compiler and an empty cache."""
    env = {"CC": str(tmp_path / "no-such-cc"), "RDMABENCH_CACHE_DIR": str(tmp_path / "cache")}
    doc = _run(["--sizes", "8"], tmp_path / "r.json", **env)
    assert {e["engine"] for e in doc["results"]} == {"native"}
    assert all(r["detail"].startswith("built at install against UCX") for r in doc["metadata"]["engine"]["ranks"])
    assert not list((tmp_path / "cache").glob("*.so"))  # nothing built (the host copy's figure is kept there)


def _compile(tmp_path: Path, header: str | None = None, *extra: str) -> tuple[int, str, Path]:
    """Build the loop (or a copy of its parts whose hotloop.h is `header`) with the build's own command."""
    prefix = native.ucx_prefix()
    assert prefix is not None
    output = tmp_path / "hotloop.so"
    command = native.compile_command(["cc"], prefix, output, *extra)
    if header is not None:
        for path in (*native.SOURCES, *native.HEADERS):
            (tmp_path / path.name).write_text(path.read_text())
        (tmp_path / "hotloop.h").write_text(header)
        command = [str(tmp_path / Path(part).name) if Path(part) in native.SOURCES else part for part in command]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=120)
    return proc.returncode, proc.stderr, output


@pytest.mark.skipif(native.ucx_prefix() is None or shutil.which("cc") is None, reason="needs cc and UCX's headers")
def test_the_loop_compiles_without_a_warning(tmp_path: Path) -> None:
    """-Wall -Wextra as errors, UCX's headers as system headers: a warning in the loop fails here."""
    code, stderr, _ = _compile(tmp_path, None, "-Werror")
    assert code == 0, stderr


@needs_native
def test_the_library_and_its_ctypes_mirror_agree() -> None:
    theirs = native.library_abi(native.load().library)
    assert theirs == native.mirror_abi()
    assert {"rb_link", "rb_rma_link.rkeys", "rb_blocks_link.data_tag", "RB_INTERRUPTED", "RB_TAG"} <= theirs.keys()


@pytest.mark.skipif(native.ucx_prefix() is None or shutil.which("cc") is None, reason="needs cc and UCX's headers")
def test_a_library_laid_out_otherwise_is_refused(tmp_path: Path) -> None:
    """A field added to hotloop.h but not to the mirror shifts every field after it: refused at load."""
    header = native.HEADER.read_text().replace(
        "    int count;    /* messages per step", "    int added;\n    int count;    /* messages per step", 1
    )
    assert header != native.HEADER.read_text()
    code, stderr, built = _compile(tmp_path, header)
    assert code == 0, stderr
    with pytest.raises(OSError, match=r"hotloop.h and its ctypes mirror disagree: rb_link"):
        native.check_abi(ctypes.PyDLL(str(built)))


def test_every_part_of_the_loop_is_built_and_digested() -> None:
    """The loop is several translation units: the first-use build compiles each, setup.py lists the
    same, and the digest (which picks a cached or installed library) changes with any of them."""
    parts = sorted(native.SOURCES[0].parent.glob("hotloop*.c"))
    assert len(parts) > 1 and list(native.SOURCES) == parts
    command = native.compile_command(["cc"], Path("/ucx"), Path("out.so"))
    assert [part for part in command if part.endswith(".c")] == [str(part) for part in parts]
    setup = (Path(native.__file__).parents[3] / "setup.py").read_text()
    assert 'glob("hotloop*.c")' in setup and 'glob("hotloop*.h")' in setup
    every = b"".join(path.read_bytes() for path in (*parts, *sorted(native.HEADER.parent.glob("hotloop*.h"))))
    assert native.source_digest() == hashlib.sha256(every).hexdigest()[:16]


@pytest.mark.skipif(native.ucx_prefix() is None or shutil.which("cc") is None, reason="needs cc and UCX's headers")
def test_the_library_exports_only_its_interface(tmp_path: Path) -> None:
    """What the parts share (now, settle, wait_all, ...) stays inside the library: only hotloop.h's
    rb_ functions are exported, so no other library's symbol of the same name can stand in."""
    code, stderr, built = _compile(tmp_path)
    assert code == 0, stderr
    symbols = subprocess.run(["nm", "-D", "--defined-only", str(built)], capture_output=True, text=True, check=True)
    functions = {line.split()[-1] for line in symbols.stdout.splitlines() if line.split()[1:2] == ["T"]}
    assert "rb_round" in functions and "rb_blocks_active" in functions
    assert {name for name in functions if not name.startswith("rb_")} <= {"_init", "_fini"}


def test_a_build_that_hangs_or_fails_is_one_line(tmp_path: Path) -> None:
    """A compiler that runs past its time is stopped and said in one line (an OSError, as the loaders
    expect, never a traceback); a failing one is said by its first error line, not a warning before it."""
    from rdmabench.wire.native import cache

    def hangs(output: Path) -> list[str]:
        return [sys.executable, "-c", "import time; time.sleep(30)"]

    def fails(output: Path) -> list[str]:
        return [
            sys.executable,
            "-c",
            "import sys; print('cc warning: x', file=sys.stderr); print('cc: error: y', file=sys.stderr); sys.exit(1)",
        ]

    for command, said in ((hangs, "ran past 0.5 s and was stopped"), (fails, "failed: cc: error: y")):
        with pytest.raises(OSError, match=said):
            cache._compile(command, tmp_path / "lib.so", 0.5)
