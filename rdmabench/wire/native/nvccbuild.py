"""The libraries nvcc builds on first use (devlists.cu, armed.cu, gpuload.cu): nvcc found
(hardware/devstack), each library built once per digest of every source it compiles into the build
cache every native library shares (cache), loaded through ctypes and typed by its own module, or one
line saying why not. Each module keeps its own sources, libraries, digest and ctypes configuration;
the flags they share are `nvcc_command`'s, the header they share `COMMON`."""

from __future__ import annotations

import ctypes
import hashlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...errors import UnsafePathError
from ...hardware.devstack import nvcc
from .cache import build_cached, open_descriptor

NVCC_TIMEOUT = 300  # seconds one nvcc build may take
COMMON = Path(__file__).with_name("cudacommon.cuh")  # what every library's source includes (it hashes it too)

# The buffer each CUDA library writes its one-line reason into (`char *why, size_t len`).
WHY_LEN = 512


def nvcc_command(compiler: str, output: Path, *rest: str) -> list[str]:
    """nvcc's line for a shared library of ours at `output`, for this machine's GPU: the flags every
    library shares, then `rest` (its sources, include paths and libraries)."""
    return [compiler, "-O3", "-std=c++17", "-arch=native", "-shared", "-Xcompiler", "-fPIC", "-o", str(output), *rest]


def digest_name(stem: str, sources: Iterable[Path], *also: str) -> str:
    """A cached library's name: `stem`, then a digest of every source it compiles and of what else it
    was built with (the compiler, UCX's prefix and version): any change builds anew."""
    found = hashlib.sha256(b"".join(path.read_bytes() for path in sources) + "".join(also).encode())
    return f"{stem}-{found.hexdigest()[:16]}.so"


@dataclass(frozen=True)
class CudaLibrary:
    library: Any  # the loaded library, or None
    note: str  # how it was built, or why it cannot be


def build(
    what: str,
    without_nvcc: str,
    name: Callable[[str], str],
    command: Callable[[str, Path], list[str]],
    configure: Callable[[Any], Any],
    against: str = "",
) -> CudaLibrary:
    """The library `name(compiler)` (a digest of its sources and the compiler), built by
    `command(compiler, output)` where no cache holds a usable copy and typed by `configure` (OSError
    when the library's codes differ); never raises. Without nvcc the note is `without_nvcc`; a
    build or load that fails says "cannot build `what`: why"; a loaded one says where it came from
    (`against`: what else it was built against, as " against X")."""
    compiler = nvcc()
    if compiler is None:
        return CudaLibrary(None, f"nvcc not found (set RDMABENCH_NVCC): {without_nvcc}")
    try:
        library, path = build_cached(
            name(compiler),
            lambda out: command(compiler, out),
            [],
            lambda fd: configure(ctypes.CDLL(open_descriptor(fd))),
            timeout=NVCC_TIMEOUT,
        )
    except (OSError, AttributeError, UnsafePathError) as exc:
        return CudaLibrary(None, f"cannot build {what}: {exc}")
    return CudaLibrary(library, f"built with {compiler}{against} ({path})")
