"""The GPU-initiated block lists' library (wire/devapi.py, native/devlists.cu) where no GPU is: how
it is built and loaded, and what a machine without nvcc says. The lists themselves run on the GPU
machine (tests/test_gpu.py)."""

from __future__ import annotations

import ctypes
import shutil
import subprocess
from pathlib import Path

import pytest

from rdmabench.anchor import nixl
from rdmabench.wire import armed, devapi, gpuload, native
from rdmabench.wire.native.cache import FirstUse

from .conftest import rdmabench_env, run_cli


def _shared_object(directory: Path, name: str, symbol: str) -> Path:
    source = directory / f"{name}.c"
    source.write_text(f"int {symbol}(void) {{ return 7; }}\n")
    built = directory / f"{name}.so"
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(built), str(source)], check=True)
    return built


@pytest.mark.skipif(shutil.which("cc") is None, reason="needs a C compiler")
def test_two_libraries_loaded_through_their_descriptors_stay_two(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """dlopen knows a library by its path: a descriptor closed and its number reused for a second
    library handed back the first (the GPU path's library came back as the hot loop)."""
    monkeypatch.setenv("RDMABENCH_CACHE_DIR", str(tmp_path / "cache"))
    loaded = []
    for name, symbol in (("first", "only_in_first"), ("second", "only_in_second")):
        source = _shared_object(tmp_path, name, symbol)
        library, path = native.build_cached(
            f"{name}-test.so",
            lambda out, s=source: ["cp", str(s), str(out)],
            [],
            lambda fd: ctypes.CDLL(native.open_descriptor(fd)),
        )
        assert path.parent == tmp_path / "cache" and oct(path.stat().st_mode & 0o777) == "0o700"
        loaded.append((library, symbol))
    for library, symbol in loaded:
        assert getattr(library, symbol)() == 7


def test_without_nvcc_the_library_says_why(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RDMABENCH_NVCC", str(tmp_path / "no-nvcc"))
    monkeypatch.setenv("RDMABENCH_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(devapi.load, "kept", None)
    found = devapi.load()
    assert found.library is None and "cannot build the GPU-initiated path" in found.note and "no-nvcc" in found.note


def test_each_native_library_is_loaded_once_and_its_answer_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every native library's load() (the hot loop, devapi, armed, gpuload) is one FirstUse: the first
    answer, a library or why not, is every later call's; its own docstring stays."""
    monkeypatch.setenv("RDMABENCH_NVCC", str(tmp_path / "no-nvcc"))
    monkeypatch.setenv("RDMABENCH_CACHE_DIR", str(tmp_path / "cache"))
    for module in (native, devapi, armed, gpuload):
        assert isinstance(module.load, FirstUse) and module.load.__doc__, module.__name__
        monkeypatch.setattr(module.load, "kept", None)
    first = gpuload.load()
    assert first.library is None and "no-nvcc" in first.note
    monkeypatch.setenv("RDMABENCH_NVCC", str(tmp_path / "still-no-nvcc"))
    assert gpuload.load() is first  # not asked again


def test_a_library_whose_codes_differ_is_refused(tmp_path: Path) -> None:
    source = tmp_path / "codes.c"
    source.write_text('const char *rb_dev_abi(void) { return "RB_DEV_OK=0;RB_DEV_PUT=5;"; }\n'
                      "int rb_dev_plan_create(void) { return 0; }\nint rb_dev_step(void) { return 0; }\n"
                      "void rb_dev_release(void) {}\n")  # fmt: skip
    if shutil.which("cc") is None:
        pytest.skip("needs a C compiler")
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(tmp_path / "codes.so"), str(source)], check=True)
    with pytest.raises(OSError, match="disagree on their codes"):
        devapi._configure(ctypes.CDLL(str(tmp_path / "codes.so")))


@pytest.mark.skipif(devapi.nvcc() is None or devapi.native.ucx_prefix() is None, reason="needs nvcc and UCX headers")
def test_the_gpu_path_compiles_for_hopper_without_a_warning(tmp_path: Path) -> None:
    """nvcc builds devlists.cu against this UCX's device headers (the GPU machine builds it for its own GPU)."""
    prefix = native.ucx_prefix()
    assert prefix is not None
    command = devapi.compile_command(str(devapi.nvcc()), prefix, tmp_path / "d.so")
    command = ["-arch=sm_90" if part == "-arch=native" else part for part in command]
    proc = subprocess.run(
        [*command, "-Xcompiler", "-Wall,-Wextra", "-Werror", "all-warnings"], capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr
    assert "warning" not in proc.stderr.lower(), proc.stderr
    library = devapi._configure(ctypes.CDLL(str(tmp_path / "d.so")))
    assert library.rb_dev_abi().startswith(b"RB_DEV_OK=0") and library.rb_dev_mapped.restype is ctypes.c_void_p


@pytest.mark.skipif(nixl.missing() is not None, reason=f"NIXL: {nixl.missing()}")
def test_the_nixl_anchor_refuses_posting_without_device_memory() -> None:
    proc = run_cli(["anchor", "--against", "nixl", "--posting", "gpu"], env=rdmabench_env())
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert "--posting chooses who posts lists of device memory: add --mode device" in lines[0]


def test_the_perftest_anchor_refuses_posting() -> None:
    proc = run_cli(["anchor", "--posting", "cpu"], env=rdmabench_env())
    assert proc.returncode == 2 and "--posting is an option of the NIXL anchor" in proc.stderr, proc.stderr
