"""A model's compute beside a transfer (native/gpuload.cu), built on first use with nvcc.

`ComputeLoad` keeps one GPU busy from a host thread of its own: a bf16 matrix product through cuBLAS
(prefill) or a kernel that streams HBM (decode), each operation timed on the GPU by its own events.
`partition(sms)` splits the GPU's SMs through green contexts: the transfer's kernels get a stream of
their own group, the load runs on the rest. `carve(sms)` plans the GEMM through cuBLASLt for the GPU's
SMs less `sms` (its SM-count target), on the whole GPU's stream: a run started `CARVED` uses it. Needs
nvcc (hardware/devstack.nvcc), cuBLAS and a GPU; where any is missing `load()` says why in one line.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import TransportError
from . import native
from .native import nvccbuild
from .native.cache import FirstUse
from .native.nvccbuild import WHY_LEN, CudaLibrary

SOURCE = Path(native.__file__).with_name("gpuload.cu")
COMMON = nvccbuild.COMMON  # included by the source: part of what a build is of
GEMM, DECODE = 0, 1
WHOLE, PART, CARVED = 0, 1, 2  # where a run's operations go: the whole GPU, the partition, the carved plan
RING = 65536  # operation times kept per run (gpuload.cu's RING)
_CODES = {"RB_LOAD_OK": 0, "RB_LOAD_CUDA": 1, "RB_LOAD_NO_MEMORY": 2, "RB_LOAD_UNSUPPORTED": 3}
_CODES.update(RB_LOAD_GEMM=GEMM, RB_LOAD_DECODE=DECODE, RING=RING)
_CODES.update(RB_LOAD_WHOLE=WHOLE, RB_LOAD_PART=PART, RB_LOAD_CARVED=CARVED)


@dataclass(frozen=True)
class Partition:
    """The SMs a green-context split gave the transfer and the load, and the transfer's stream."""

    stream: int
    context: int
    transfer_sms: int
    load_sms: int


def driver_stubs(compiler: str) -> list[str]:
    """-L options for the CUDA driver's link stubs beside `compiler` (libcuda.so itself comes with the
    driver at run time)."""
    root = Path(compiler).resolve().parent.parent
    found = [root / "lib64" / "stubs", root / "targets" / "x86_64-linux" / "lib" / "stubs", root / "lib" / "stubs"]
    return [f"-L{path}" for path in found if path.is_dir()]


def compile_command(compiler: str, output: Path) -> list[str]:
    lib = Path(compiler).resolve().parent.parent / "lib64"
    return nvccbuild.nvcc_command(
        compiler, output, str(SOURCE), *driver_stubs(compiler), "-lcublas", "-lcublasLt", "-lcuda",
        "-Xlinker", f"-rpath={lib}",
    )  # fmt: skip


def library_name(compiler: str) -> str:
    """The cached library's name: a digest of the sources (the shared header too) and the compiler."""
    return nvccbuild.digest_name("gpuload", (SOURCE, COMMON), compiler)


@FirstUse
def load() -> CudaLibrary:
    """The compute-load library, built once per source and compiler; never raises."""
    return nvccbuild.build(
        "the compute load", "the compute load is built with it once", library_name, compile_command, _configure
    )


def _configure(library: Any) -> Any:
    ptr, size, why = ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p
    library.rb_load_abi.restype = ctypes.c_char_p
    text = (library.rb_load_abi() or b"").decode()  # first: a library of another source lacks the rest
    if native.parse_abi(text) != _CODES:
        raise OSError(f"gpuload.cu and gpuload.py disagree on their codes ({text})")
    library.rb_load_create.argtypes = [ctypes.c_int, ctypes.c_int, size, ctypes.POINTER(ptr), why, size]
    library.rb_load_create.restype = ctypes.c_int
    ints = ctypes.POINTER(ctypes.c_int)
    library.rb_load_partition.argtypes = [ptr, ctypes.c_int, ctypes.POINTER(ptr), ctypes.POINTER(ptr), ints, ints]
    library.rb_load_partition.argtypes += [why, size]
    library.rb_load_partition.restype = ctypes.c_int
    library.rb_load_carve.argtypes = [ptr, ctypes.c_int, why, size]
    library.rb_load_carve.restype = ctypes.c_int
    library.rb_load_sm_count.argtypes = [ptr]
    library.rb_load_sm_count.restype = ctypes.c_int
    library.rb_load_start.argtypes = [ptr, ctypes.c_int, why, size]
    library.rb_load_start.restype = ctypes.c_int
    library.rb_load_stop.argtypes = [ptr, ctypes.POINTER(ctypes.c_double), size, ctypes.POINTER(size)]
    library.rb_load_stop.argtypes += [ctypes.POINTER(ctypes.c_double), why, size]
    library.rb_load_stop.restype = ctypes.c_int
    library.rb_load_done.argtypes = [ptr]
    library.rb_load_done.restype = size
    library.rb_load_failed.argtypes = [ptr]
    library.rb_load_failed.restype = ctypes.c_int
    library.rb_load_work.argtypes = [ptr]
    library.rb_load_work.restype = ctypes.c_double
    library.rb_load_release.argtypes = [ptr]
    library.rb_load_release.restype = None
    return library


@dataclass(frozen=True)
class LoadRun:
    """One run of the load: every operation's GPU seconds, and the run's wall seconds."""

    seconds: list[float]
    wall: float


class ComputeLoad:
    """A compute load on one GPU: `kind` GEMM (`size`: the matrices' order) or DECODE (`size`: bytes
    streamed per operation)."""

    def __init__(self, device: int, kind: int, size: int):
        available = load()
        if available.library is None:
            raise TransportError(available.note)
        self._lib = available.library
        self._handle = ctypes.c_void_p()
        why = ctypes.create_string_buffer(WHY_LEN)
        rc = self._lib.rb_load_create(device, kind, size, ctypes.byref(self._handle), why, WHY_LEN)
        if rc != 0:
            self.release()
            raise TransportError(f"the compute load on GPU {device}: {why.value.decode(errors='replace')}")
        self.work = float(self._lib.rb_load_work(self._handle))  # flops or bytes per operation
        self.sm_count = int(self._lib.rb_load_sm_count(self._handle))  # the GPU's SMs, all of them
        self.partition: Partition | None = None

    def split(self, sms: int) -> Partition:
        """Give `sms` SMs (rounded up as the GPU splits them) to a transfer, the rest to this load."""
        if self.partition is not None:
            return self.partition
        stream, context, mine, theirs = ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_int(), ctypes.c_int()
        why = ctypes.create_string_buffer(WHY_LEN)
        rc = self._lib.rb_load_partition(
            self._handle, sms, ctypes.byref(stream), ctypes.byref(context), ctypes.byref(mine), ctypes.byref(theirs),
            why, WHY_LEN,
        )  # fmt: skip
        if rc != 0:
            raise TransportError(f"an SM partition of {sms}: {why.value.decode(errors='replace')}")
        self.partition = Partition(int(stream.value or 0), int(context.value or 0), mine.value, theirs.value)
        return self.partition

    def carve(self, sms: int) -> None:
        """Plan the GEMM for the GPU's SMs less `sms` (cuBLASLt's SM-count target) for runs started CARVED."""
        why = ctypes.create_string_buffer(WHY_LEN)
        if self._lib.rb_load_carve(self._handle, sms, why, WHY_LEN) != 0:
            raise TransportError(f"a carve-out of {sms} SMs: {why.value.decode(errors='replace')}")

    def start(self, where: int = WHOLE) -> None:
        """Start the operations: on the whole GPU (WHOLE), the partition's SMs (PART) or the carved plan (CARVED)."""
        why = ctypes.create_string_buffer(WHY_LEN)
        if self._lib.rb_load_start(self._handle, int(where), why, WHY_LEN) != 0:
            raise TransportError(f"the compute load: {why.value.decode(errors='replace')}")

    def done(self) -> int:
        """Operations finished since the start."""
        return int(self._lib.rb_load_done(self._handle))

    def failed(self) -> bool:
        """Whether the operations ended on an error (stop() raises it, with its reason)."""
        return bool(self._lib.rb_load_failed(self._handle))

    def stop(self) -> LoadRun:
        times = (ctypes.c_double * RING)()
        count, wall, why = ctypes.c_size_t(), ctypes.c_double(), ctypes.create_string_buffer(WHY_LEN)
        rc = self._lib.rb_load_stop(self._handle, times, RING, ctypes.byref(count), ctypes.byref(wall), why, WHY_LEN)
        if rc != 0:
            raise TransportError(f"the compute load: {why.value.decode(errors='replace')}")
        return LoadRun(list(times[: count.value]), wall.value)

    def release(self) -> None:
        if self._handle.value:
            self._lib.rb_load_release(self._handle)
            self._handle = ctypes.c_void_p()
