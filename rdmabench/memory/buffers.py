"""The memory a message lives in: pageable or pinned (page-locked) host memory, CUDA device memory,
unified (managed) memory, pinned host memory mapped into the GPU, or device memory that travels
through pinned host staging buffers (see staging.py)."""

from __future__ import annotations

import ctypes
import ctypes.util
import mmap
import os
from typing import Any

import numpy as np

from ..errors import ResourceError
from ..hardware.gpu import gpu_unavailable_reason, import_cupy
from ..hardware.memlock import memlock_limit_text
from ..modes import PIN_CUDA, PIN_MAPPED, PIN_MLOCK, MemoryMode
from ..units import format_size

_HOST_ALLOC_PORTABLE_MAPPED = 1 | 2  # cudaHostAllocPortable | cudaHostAllocMapped
PAGE_SIZE = mmap.PAGESIZE


class Buffer:
    """One message buffer: `.array` is a 1-D uint8 NumPy (host) or CuPy (device) array of `nbytes`,
    backed by `capacity` bytes (rounded up to whole 64-bit words so patterns work on words)."""

    def __init__(self, array: Any, mode: MemoryMode, pinned_method: str | None, keepalive: Any = None):
        self.array = array
        self.whole = array  # the allocation itself; `array` may be a prefix of it when reused
        self.capacity = int(array.size)
        self.mode = mode
        self.pinned_method = pinned_method
        self._keepalive = keepalive
        self._unlock: Any = None

    @property
    def address(self) -> int:
        """Where the bytes start, as UCX and CUDA see it."""
        if self.mode.on_device:
            return int(self.array.data.ptr)
        return int(self.array.ctypes.data)

    @property
    def xp(self) -> Any:
        if self.mode.on_device:
            return import_cupy()
        return np

    def release(self) -> None:
        """Give the memory back; pinned buffers go back to the pool, to serve the next size, others
        to the recycler while a job keeps them for its next round."""
        if self.mode.pinned_host and self.array is not None:
            PINNED_POOL.give_back(self)
            self.array = None
            return
        if self.mode.ucx_allocated:  # UCX frees it when the round unmaps it
            self.array = None
            return
        if self.array is not None and RECYCLER.keep(self):
            return
        self.free()

    def free(self) -> None:
        if self._unlock is not None:
            self._unlock()
            self._unlock = None
        self.array = None
        self._keepalive = None


class PinnedPool:
    """Pinned buffers are allocated once and reused for every later need they are big enough for:
    pinning costs far more than a malloc, and page-locked memory is scarce. `cap` bounds how much
    the pool may hold (None: no bound beyond the memlock limit or the CUDA driver's)."""

    def __init__(self) -> None:
        self.cap: int | None = None
        self._free: list[Buffer] = []
        self.pinned_bytes = 0  # in the pool and in use
        self.allocations = 0  # how many times memory was actually pinned

    def take(self, capacity: int, method: str) -> Buffer:
        """A page-locked buffer of at least `capacity` bytes, pinned by `method` (PIN_*)."""
        fits = [b for b in self._free if b.capacity >= capacity and b.pinned_method == method]
        if fits:
            buffer = min(fits, key=lambda b: b.capacity)
            self._free.remove(buffer)
            buffer.array = buffer.whole[:capacity]
            buffer.array[:] = 0  # like a new allocation: no bytes of an earlier size survive
            return buffer
        if self.cap is not None and self.pinned_bytes + capacity > self.cap:
            # Smaller buffers no later size can use make room first.
            for small in sorted((b for b in self._free if b.capacity < capacity), key=lambda b: b.capacity):
                self._forget(small)
                if self.pinned_bytes + capacity <= self.cap:
                    break
        if self.cap is not None and self.pinned_bytes + capacity > self.cap:
            raise ResourceError(
                f"pinning {format_size(capacity)} more would hold {format_size(self.pinned_bytes + capacity)} "
                f"page-locked, over the --max-pinned cap of {format_size(self.cap)}; raise the cap or use smaller sizes or --window"
            )
        buffer = _allocate_mlocked(capacity) if method == PIN_MLOCK else _allocate_cuda_pinned(capacity, method)
        self.pinned_bytes += capacity
        self.allocations += 1
        return buffer

    def give_back(self, buffer: Buffer) -> None:
        self._free.append(buffer)

    def _forget(self, buffer: Buffer) -> None:
        self._free.remove(buffer)
        self.pinned_bytes -= buffer.capacity
        buffer.array = buffer.whole
        buffer.free()

    def clear(self) -> None:
        for buffer in list(self._free):
            self._forget(buffer)


PINNED_POOL = PinnedPool()


class Recycler:
    """Pageable, device and managed buffers kept from one round to the next of the same size. A fresh
    allocation every round costs far more than the round's transfers on a GPU: cudaMalloc, and the
    peer's CUDA IPC mapping of every new buffer (cuIpcOpenMemHandle) in the round's warm-up. Reused,
    the buffers keep their addresses, so UCX's registration and IPC caches hit, as they do for any
    application that reuses its buffers. A job turns it on and empties it when the size changes."""

    def __init__(self) -> None:
        self.enabled = False
        self._free: dict[tuple[MemoryMode, int], list[Buffer]] = {}

    def keep(self, buffer: Buffer) -> bool:
        if not self.enabled or buffer.mode.pinned_host:
            return False
        self._free.setdefault((buffer.mode, buffer.capacity), []).append(buffer)
        return True

    def take(self, mode: MemoryMode, capacity: int) -> Buffer | None:
        """A kept buffer of exactly `capacity` bytes, zeroed like a new one (None if there is none)."""
        kept = self._free.get((mode, capacity))
        if not kept:
            return None
        buffer = kept.pop()
        buffer.array.fill(0)
        return buffer

    def clear(self) -> None:
        for kept in self._free.values():
            for buffer in kept:
                buffer.free()
        self._free.clear()


RECYCLER = Recycler()


def page_aligned_zeros(capacity: int) -> Any:
    """Zeroed host memory whose first byte starts a page, as OSU's and ucx_perftest's buffers do: a
    copy between processes (cma) pins every page a message touches, and an unaligned 64 KiB message
    touches 17 pages instead of 16. Buffers under a page stay packed as NumPy places them: they go
    eagerly (copied through shared memory, nothing pinned), and a window of 64 of them each at a page
    start would share a few L1 cache sets."""
    if capacity < PAGE_SIZE:
        return np.zeros(capacity, dtype=np.uint8)
    raw = np.zeros(capacity + PAGE_SIZE, dtype=np.uint8)
    offset = -raw.ctypes.data % PAGE_SIZE
    return raw[offset : offset + capacity]  # the slice keeps `raw` alive


def word_capacity(nbytes: int) -> int:
    return (nbytes + 7) // 8 * 8


def allocate(mode: MemoryMode, nbytes: int, have_gpu: bool) -> Buffer:
    """Allocate a zeroed buffer of at least `nbytes` in `mode`.

    Pinned memory comes from cudaHostAlloc where a GPU is present (so the GPU can DMA it) and from
    mlock otherwise; both are page-locked, but only the first is registered with the CUDA driver.
    """
    capacity = word_capacity(nbytes)
    if not mode.pinned_host:
        kept = RECYCLER.take(mode, capacity)
        if kept is not None:
            return kept
    allocation = mode.record.allocation
    if allocation == "pageable":
        return Buffer(page_aligned_zeros(capacity), mode, None)
    if allocation == "pinned":
        return PINNED_POOL.take(capacity, PIN_CUDA if have_gpu else PIN_MLOCK)
    cupy = import_cupy()
    if cupy is None or not have_gpu:
        raise ResourceError(f"{mode.value} memory needs a GPU: {gpu_unavailable_reason()}")
    if allocation == "mapped":
        return PINNED_POOL.take(capacity, PIN_MAPPED)
    try:
        if allocation == "managed":
            pointer = cupy.cuda.MemoryPointer(cupy.cuda.ManagedMemory(capacity), 0)
            array = cupy.ndarray(capacity, dtype=cupy.uint8, memptr=pointer)
            array.fill(0)
            return Buffer(array, mode, None)
        return Buffer(cupy.zeros(capacity, dtype=cupy.uint8), mode, None)
    except (cupy.cuda.memory.OutOfMemoryError, cupy.cuda.runtime.CUDARuntimeError) as exc:
        raise ResourceError(
            f"cannot allocate {format_size(nbytes)} of {mode.value} memory ({exc}); use smaller sizes or a smaller --window"
        ) from None


def _allocate_cuda_pinned(capacity: int, method: str) -> Buffer:
    cupy = import_cupy()
    assert cupy is not None
    flags = _HOST_ALLOC_PORTABLE_MAPPED if method == PIN_MAPPED else 0
    try:
        memory = cupy.cuda.PinnedMemory(capacity, flags)
    except Exception as exc:
        raise ResourceError(f"cudaHostAlloc of {format_size(capacity)} failed: {exc}") from None
    pointer = cupy.cuda.PinnedMemoryPointer(memory, 0)
    array = np.frombuffer(pointer, dtype=np.uint8, count=capacity)
    array[:] = 0
    mode = MemoryMode.MAPPED if method == PIN_MAPPED else MemoryMode.PINNED
    return Buffer(array, mode, method, keepalive=(memory, pointer))


_libc: Any = None


def _load_libc() -> Any:
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    return _libc


def _allocate_mlocked(capacity: int) -> Buffer:
    region = mmap.mmap(-1, capacity, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    array = np.frombuffer(region, dtype=np.uint8, count=capacity)
    address = array.ctypes.data
    libc = _load_libc()
    if libc.mlock(ctypes.c_void_p(address), ctypes.c_size_t(capacity)) != 0:
        err = ctypes.get_errno()
        del array
        region.close()
        raise ResourceError(
            f"cannot pin {format_size(capacity)} with mlock ({os.strerror(err)}); "
            f"raise the memlock limit (ulimit -l, now {memlock_limit_text()}) or use smaller sizes"
        )
    buffer = Buffer(array, MemoryMode.PINNED, PIN_MLOCK, keepalive=region)

    def unlock() -> None:
        libc.munlock(ctypes.c_void_p(address), ctypes.c_size_t(capacity))

    buffer._unlock = unlock
    return buffer


def synchronize(mode: MemoryMode) -> None:
    """Wait for GPU work that wrote a device buffer before UCX reads it."""
    if mode.on_device:
        cupy = import_cupy()
        assert cupy is not None
        cupy.cuda.get_current_stream().synchronize()
