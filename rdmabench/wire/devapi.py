"""GPU-initiated block lists through UCX's device API (native/devlists.cu), built on first use with nvcc.

A block list posted from the CPU costs one ucp_put_nbx per block, and over CUDA IPC each is a CUDA
copy and an event: microseconds a block whatever its size (docs/measurements.md, "Block lists").
UCX 1.20+ lets a kernel post the whole list (ucp_device_put over the endpoint's device lane): one
launch per transfer. The same kernel shape over both pools as mapped pointers, with a plain copy of
our own, is the list's ceiling: what the GPU does with it, without UCX.

Needs UCX's device headers (the libucx wheel has them from 1.20), nvcc ($RDMABENCH_NVCC, $NVCC,
nvcc on PATH, or $CUDA_HOME/bin), a GPU, and a UCX context created with UCP_FEATURE_DEVICE. When any
is missing, `load()` says why in one line and the block lists are posted from the CPU.

The same plan moves a list through the copy engines instead (`ce-batch`: one cudaMemcpyBatchAsync a
transfer over the peer's pool as UCX maps it, CUDA 12.8+), and holds its posting kernel to an SM
budget or a green context's SMs beside a model's compute (`configure`). The copy engines armed ahead
of the data are a library of their own (armed.py); the plan gives them the peer's pool
as UCX maps it (`DevicePlan.mapped`).
"""

from __future__ import annotations

import ctypes
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import TransportError
from ..hardware.devstack import nvcc as nvcc  # where callers and the tests find nvcc
from ..hardware.devstack import version_mismatch, version_text
from . import native
from .native import nvccbuild
from .native.cache import FirstUse
from .native.nvccbuild import WHY_LEN, CudaLibrary

SOURCE = Path(native.__file__).with_name("devlists.cu")
COMMON = nvccbuild.COMMON  # included by the source: part of what a build is of
# Operations of a step, as devlists.cu numbers them.
PUT, GET, CEILING_PUT, CEILING_GET, CE_PUT, CE_GET = 0, 1, 2, 3, 4, 5
_CODES = {"RB_DEV_OK": 0, "RB_DEV_TIMEOUT": 1, "RB_DEV_UCX": 2, "RB_DEV_CUDA": 3, "RB_DEV_NO_MEMORY": 4}
_CODES.update(RB_DEV_UNSUPPORTED=5, RB_DEV_PUT=PUT, RB_DEV_GET=GET, RB_DEV_CEILING_PUT=CEILING_PUT)
_CODES.update(RB_DEV_CEILING_GET=CEILING_GET, RB_DEV_CE_PUT=CE_PUT, RB_DEV_CE_GET=CE_GET)
# What runs each operation, for the results.
PATHS = {
    PUT: "gpu-initiated: ucp_device_put per block from one kernel (UCX device API)",
    GET: "gpu-initiated: copy kernel from the peer's pool as UCX maps it (ucp_device_get_ptr)",
    CE_PUT: "copy engines: one cudaMemcpyBatchAsync per transfer into the peer's pool as UCX maps it",
    CE_GET: "copy engines: one cudaMemcpyBatchAsync per transfer from the peer's pool as UCX maps it",
}
API_CALLS = ("ucp_device_put", "ucp_device_get_ptr")  # what a put, a get calls on the GPU
HOST_POSTED = "host-posted: one ucp_put_nbx/ucp_get_nbx per descriptor from the CPU"


def compile_command(compiler: str, prefix: Path, output: Path) -> list[str]:
    lib = prefix / "lib"
    return nvccbuild.nvcc_command(
        compiler, output, str(SOURCE), "-isystem", str(prefix / "include"), f"-L{lib}", "-lucp", "-lucs",
        "-Xlinker", f"-rpath={lib}",
    )  # fmt: skip


def library_name(prefix: Path, compiler: str) -> str:
    version = version_text(prefix) or ""
    return nvccbuild.digest_name("devlists", (SOURCE, COMMON), str(prefix), version, compiler)


@FirstUse
def load() -> CudaLibrary:
    """The GPU-initiated block-list library, built once per source and UCX; never raises."""
    prefix = native.ucx_prefix()
    if prefix is None:
        return CudaLibrary(None, "UCX headers not found (the libucx wheel provides them)")
    if not (prefix / "include" / "ucp" / "api" / "device" / "ucp_host.h").exists():
        return CudaLibrary(None, f"this UCX ({prefix}) has no device API (UCX 1.20 or later has it)")
    mismatch = version_mismatch(prefix)  # before a kernel is built or loaded: it would misread the lists
    if mismatch is not None:
        return CudaLibrary(None, mismatch)
    return nvccbuild.build(
        "the GPU-initiated path",
        "the GPU-initiated path needs it once",
        lambda compiler: library_name(prefix, compiler),
        lambda compiler, out: compile_command(compiler, prefix, out),
        _configure,
        against=f" against {prefix}",
    )


def _configure(library: Any) -> Any:
    ptr, size, out_int, double = ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_int), ctypes.c_double
    u64s, doubles = ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_double)
    library.rb_dev_abi.restype = ctypes.c_char_p
    text = (library.rb_dev_abi() or b"").decode()  # first: a library of another source lacks the rest
    if native.parse_abi(text) != _CODES:
        raise OSError(f"devlists.cu and devapi.py disagree on their codes ({text})")
    library.rb_dev_plan_create.argtypes = [
        ptr, ptr, ptr, ptr, size, ctypes.c_uint64, ptr, u64s, u64s, size, ctypes.c_int, double,
        ctypes.POINTER(ptr), out_int, ctypes.c_char_p, size,
    ]  # fmt: skip
    library.rb_dev_plan_create.restype = ctypes.c_int
    library.rb_dev_step.argtypes = [ptr, ctypes.c_int, size, double, doubles, doubles, doubles, ctypes.c_char_p, size]
    library.rb_dev_step.restype = ctypes.c_int
    library.rb_dev_release.argtypes = [ptr]
    library.rb_dev_release.restype = None
    library.rb_dev_configure.argtypes = [ptr, ctypes.c_int, ptr, ptr]
    library.rb_dev_configure.restype = ctypes.c_int
    library.rb_dev_mapped.argtypes = [ptr]
    library.rb_dev_mapped.restype = ptr
    library.rb_dev_ce_unsupported.argtypes = []
    library.rb_dev_ce_unsupported.restype = ctypes.c_char_p
    return library


def copy_engines_problem(library: Any) -> str | None:
    """Why the copy engines' path (cudaMemcpyBatchAsync: a CUDA 12.8 runtime and driver) cannot run
    with this devlists library, or None."""
    found = library.rb_dev_ce_unsupported()
    return found.decode(errors="replace") if found else None


class DevicePlan:
    """One link's block lists on the GPU: UCX's descriptor lists of both pools, the offsets uploaded,
    the peer's pool mapped. `offsets` and `remote_offsets` hold every block of a step (batch
    transfers of equal count), in bytes from each pool's start."""

    def __init__(
        self,
        library: Any,
        where: str,
        handles: tuple[int, int, int],
        pool: tuple[int, int],
        remote: tuple[int, int],
        offsets: np.ndarray,
        remote_offsets: np.ndarray,
        batch: int,
        timeout: float,
    ):
        worker, endpoint, memh = handles
        self._lib, self._where, self._batch, self._timeout = library, where, batch, timeout
        local = np.ascontiguousarray(offsets, dtype=np.uint64)
        far = np.ascontiguousarray(remote_offsets, dtype=np.uint64)
        plan, status, why = ctypes.c_void_p(), ctypes.c_int(), ctypes.create_string_buffer(WHY_LEN)
        u64s = ctypes.POINTER(ctypes.c_uint64)
        rc = library.rb_dev_plan_create(
            worker, endpoint, memh, pool[0], pool[1], remote[0], remote[1], local.ctypes.data_as(u64s),
            far.ctypes.data_as(u64s), len(local), batch, timeout, ctypes.byref(plan), ctypes.byref(status), why,
            WHY_LEN,
        )  # fmt: skip
        self._plan = plan
        if rc != 0:
            self.release()
            raise TransportError(f"{why.value.decode(errors='replace')} ({where})")

    def step(self, operation: int, block: int) -> tuple[float, list[float], list[float]]:
        """One step: (seconds of the step, each transfer's seconds, each transfer's posting seconds)."""
        seconds, posting = (ctypes.c_double * self._batch)(), (ctypes.c_double * self._batch)()
        step, why = ctypes.c_double(), ctypes.create_string_buffer(WHY_LEN)
        rc = self._lib.rb_dev_step(
            self._plan, operation, block, self._timeout, posting, seconds, ctypes.byref(step), why, WHY_LEN
        )
        if rc != 0:
            raise TransportError(f"{why.value.decode(errors='replace')} ({self._where})")
        return step.value, list(seconds), list(posting)

    def configure(self, ctas: int = 0, stream: int | None = None, context: int | None = None) -> None:
        """Posting kernels on at most `ctas` CUDA blocks (0: the whole GPU), on a green context's
        `stream` and `context` where a partition gives them (None: the plan's own)."""
        if self._lib.rb_dev_configure(self._plan, ctas, stream, context) != 0:
            raise TransportError(f"this CUDA runtime cannot launch into a green context (CUDA 12.5+) ({self._where})")

    @property
    def mapped(self) -> int:
        """The peer's pool as UCX maps it into this process: the other end of an armed list (armed.ArmedPlan)."""
        return int(self._lib.rb_dev_mapped(self._plan) or 0)

    def release(self) -> None:
        if self._plan.value:
            self._lib.rb_dev_release(self._plan)
            self._plan = ctypes.c_void_p()
