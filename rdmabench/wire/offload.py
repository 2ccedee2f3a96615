"""KV offload between this GPU's device pool and this process's pinned host pool (native/offload.cu, a
library of its own that needs no UCX, built on first use with nvcc), both directions: swap-out (device
-> host) and swap-in (host -> device).

One plan a block list moves it by a copy kernel of ours through the host pool's mapped pointers at a
`Pace` (CTAs x threads a CTA: the threads in flight, each holding LANE_BYTES), by the copy engines in
one `cudaMemcpyBatchAsync` a list, by one `cudaMemcpyAsync` a block ("direct"), or as one contiguous
copy of the list's bytes (the reference). The copy engines armed ahead of the data are armed.py's plan,
given the host pool's pointers as its far end. `why_not(device)` says in one line why a GPU cannot
offload (no nvcc, no such GPU, one that cannot map host memory).
"""

from __future__ import annotations

import ctypes
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ConfigError, TransportError
from . import native
from .native import nvccbuild
from .native.cache import FirstUse
from .native.nvccbuild import WHY_LEN, CudaLibrary

SOURCE = Path(native.__file__).with_name("offload.cu")
COMMON = nvccbuild.COMMON  # included by the source: part of what a build is of
OUT, IN = 0, 1  # swap-out (device -> host), swap-in (host -> device)
DIRECTIONS = {"out": OUT, "in": IN}
KERNEL, CE_BATCH, DIRECT, CONTIGUOUS = 0, 1, 2, 3
MAX_THREADS, MAX_CTAS, LANE_BYTES = 1024, 65536, 128
_CODES = {"RB_OFF_OK": 0, "RB_OFF_TIMEOUT": 1, "RB_OFF_CUDA": 2, "RB_OFF_NO_MEMORY": 3, "RB_OFF_UNSUPPORTED": 4}
_CODES.update(RB_OFF_ARGUMENT=5, RB_OFF_OUT=OUT, RB_OFF_IN=IN, RB_OFF_KERNEL=KERNEL, RB_OFF_CE_BATCH=CE_BATCH)
_CODES.update(RB_OFF_DIRECT=DIRECT, RB_OFF_CONTIGUOUS=CONTIGUOUS, RB_OFF_MAX_THREADS=MAX_THREADS)
_CODES.update(RB_OFF_MAX_CTAS=MAX_CTAS, LANE_BYTES=LANE_BYTES)
PATHS = {
    KERNEL: "copy kernel through the pinned pool's mapped pointers: a warp a block, loads before stores",
    CE_BATCH: "copy engines: one cudaMemcpyBatchAsync a list",
    DIRECT: "copy engines: one cudaMemcpyAsync a block (direct)",
    CONTIGUOUS: "one cudaMemcpyAsync of the list's bytes (the contiguous reference)",
}


def compile_command(compiler: str, output: Path) -> list[str]:
    """offload.cu alone (no UCX, no libcuda: runtime calls only)."""
    return nvccbuild.nvcc_command(compiler, output, str(SOURCE))


def library_name(compiler: str) -> str:
    return nvccbuild.digest_name("offload", (SOURCE, COMMON), compiler)


@FirstUse
def load() -> CudaLibrary:
    """The offload library, built once per source and compiler; never raises."""
    return nvccbuild.build(
        "the offload paths", "the offload paths need it once", library_name, compile_command, configure
    )


def configure(library: Any) -> Any:
    """The library's calls typed; OSError when its codes differ from this module's."""
    ptr, size, text, double = ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p, ctypes.c_double
    u64s, doubles, integer = ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_double), ctypes.c_int
    library.rb_off_abi.restype = ctypes.c_char_p
    said = (library.rb_off_abi() or b"").decode()  # first: a library of another source lacks the rest
    if native.parse_abi(said) != _CODES:
        raise OSError(f"offload.cu and offload.py disagree on their codes ({said})")
    library.rb_off_unsupported.argtypes = [integer, text, size]
    library.rb_off_unsupported.restype = integer
    library.rb_off_sm_count.argtypes = [integer]
    library.rb_off_sm_count.restype = integer
    library.rb_off_create.argtypes = [integer, ptr, size, ptr, size, u64s, u64s, size, size, ctypes.POINTER(ptr)]
    library.rb_off_create.argtypes += [text, size]
    library.rb_off_create.restype = integer
    library.rb_off_step.argtypes = [ptr, integer, integer, size, size, integer, integer, integer, double]
    library.rb_off_step.argtypes += [doubles, doubles, text, size]
    library.rb_off_step.restype = integer
    library.rb_off_mapped.argtypes = [ptr]
    library.rb_off_mapped.restype = ptr
    library.rb_off_ce_unsupported.argtypes = []
    library.rb_off_ce_unsupported.restype = ctypes.c_char_p
    library.rb_off_release.argtypes = [ptr]
    library.rb_off_release.restype = None
    return library


def why_not(device: int = 0) -> str | None:
    """Why GPU `device` cannot offload to pinned host memory, in one line, or None."""
    available = load()
    if available.library is None:
        return available.note
    why = ctypes.create_string_buffer(WHY_LEN)
    if available.library.rb_off_unsupported(device, why, WHY_LEN) != 0:
        return why.value.decode(errors="replace")
    return None


def copy_engines_problem() -> str | None:
    """Why the copy engines' batch (cudaMemcpyBatchAsync: a CUDA 12.8 runtime and driver) cannot move
    an offload's list here, in one line, or None."""
    available = load()
    if available.library is None:
        return available.note
    found = available.library.rb_off_ce_unsupported()
    return found.decode(errors="replace") if found else None


_PACE = re.compile(r"^(\d{1,5})x(\d{1,2})x(\d{2,4})$", re.ASCII)  # int() reads other scripts' digits


@dataclass(frozen=True, order=True)
class Pace:
    """How hard the offload kernel pushes: `sms` SMs' worth of CTAs, `ctas` CTAs an SM, `threads` a CTA.
    The grid is sms x ctas CTAs; the threads in flight, sms x ctas x threads, each hold LANE_BYTES of
    loads before storing (a warp a block). Written SMSxCTASxTHREADS, e.g. 8x2x128."""

    sms: int
    ctas: int
    threads: int

    @classmethod
    def parse(cls, text: str) -> Pace:
        found = _PACE.match(text.strip())
        if found is None:
            raise ConfigError(
                f"a pace is SMSxCTASxTHREADS (SMs, CTAs an SM, threads a CTA), e.g. 8x2x128, not {text!r}"
            )
        return cls(*map(int, found.groups())).check()

    def check(self) -> Pace:
        if self.sms < 1 or self.ctas < 1 or self.sms * self.ctas > MAX_CTAS:
            raise ConfigError(f"pace {self.label}: at least one SM and one CTA, at most {MAX_CTAS} CTAs in all")
        if self.threads % 32 or not 32 <= self.threads <= MAX_THREADS:
            raise ConfigError(f"pace {self.label}: threads a CTA are a multiple of 32 from 32 to {MAX_THREADS}")
        return self

    @property
    def grid(self) -> int:
        return self.sms * self.ctas

    @property
    def in_flight(self) -> int:
        """Threads in flight: the pace's one number (a warp a block, LANE_BYTES a thread)."""
        return self.grid * self.threads

    @property
    def bytes_in_flight(self) -> int:
        return self.in_flight * LANE_BYTES

    @property
    def label(self) -> str:
        return f"{self.sms}x{self.ctas}x{self.threads}"


@dataclass(frozen=True)
class OffloadStep:
    """One step: the GPU's seconds for the list `repeat` times (CUDA events), and the host's seconds in
    the posting calls (what a sustained figure adds when the posting thread is the bottleneck)."""

    gpu_seconds: float
    post_seconds: float


def _offsets(values: Any, what: str) -> np.ndarray:
    try:
        found = np.ascontiguousarray(np.asarray(values, dtype=np.int64).reshape(-1))
    except (TypeError, ValueError, OverflowError):
        raise ConfigError(f"an offload list's {what} offsets are integers") from None
    if (found < 0).any():
        raise ConfigError(f"an offload list's {what} offsets are not negative")
    return found.view(np.uint64)


class OffloadPlan:
    """A block list between GPU `device`'s pool (`device_pool`: (pointer, bytes)) and the pinned host
    pool (`host_pool`: (pointer, bytes)), block i at `device_offsets[i]` and `host_offsets[i]`, each
    `block` bytes. `step()` moves blocks of it by a path in a direction; `close()` at the end."""

    def __init__(
        self, device: int, device_pool: tuple[int, int], host_pool: tuple[int, int], device_offsets: Any,
        host_offsets: Any, block: int, timeout: float = 60.0, where: str = "",
    ):  # fmt: skip
        self._dev, self._host = _offsets(device_offsets, "device"), _offsets(host_offsets, "host")
        if len(self._dev) == 0 or len(self._dev) != len(self._host):
            raise ConfigError(
                f"an offload list needs as many host as device offsets, and some: {len(self._dev)}, {len(self._host)}"
            )
        self.device, self.block, self.count = device, block, len(self._dev)
        self._timeout, self._where, self._plan = timeout, where, ctypes.c_void_p()
        available = load()
        if available.library is None:
            raise TransportError(self._said(available.note))
        self._lib = available.library
        u64s, why = ctypes.POINTER(ctypes.c_uint64), ctypes.create_string_buffer(WHY_LEN)
        rc = self._lib.rb_off_create(
            device, device_pool[0], device_pool[1], host_pool[0], host_pool[1], self._dev.ctypes.data_as(u64s),
            self._host.ctypes.data_as(u64s), self.count, block, ctypes.byref(self._plan), why, WHY_LEN,
        )  # fmt: skip
        if rc != 0:
            self.close()
            raise TransportError(self._said(why.value.decode(errors="replace")))

    def _said(self, line: str) -> str:
        return f"{line} ({self._where})" if self._where else line

    def step(
        self, path: int, direction: int, first: int = 0, count: int | None = None, repeat: int = 1,
        pace: Pace | None = None,
    ) -> OffloadStep:  # fmt: skip
        """Blocks [first, first + count) by `path` in `direction` (OUT, IN), `repeat` times back to back;
        the kernel at `pace` (needed for KERNEL). Returns when every copy has landed."""
        if path == KERNEL and pace is None:
            raise ConfigError("the offload kernel needs a pace (SMSxCTASxTHREADS)")
        grid, threads = (pace.grid, pace.threads) if pace is not None else (1, 32)
        gpu, post, why = ctypes.c_double(), ctypes.c_double(), ctypes.create_string_buffer(WHY_LEN)
        rc = self._lib.rb_off_step(
            self._plan, path, direction, first, self.count - first if count is None else count, repeat, grid, threads,
            self._timeout, ctypes.byref(gpu), ctypes.byref(post), why, WHY_LEN,
        )  # fmt: skip
        if rc != 0:
            raise TransportError(self._said(why.value.decode(errors="replace")))
        return OffloadStep(gpu.value, post.value)

    @property
    def mapped(self) -> int:
        """The host pool as the GPU addresses it."""
        return int(self._lib.rb_off_mapped(self._plan) or 0)

    def close(self) -> None:
        if self._plan.value:
            self._lib.rb_off_release(self._plan)
            self._plan = ctypes.c_void_p()

    def __enter__(self) -> OffloadPlan:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()
